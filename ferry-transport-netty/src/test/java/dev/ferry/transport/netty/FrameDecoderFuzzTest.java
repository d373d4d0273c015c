package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.CorruptedFrameException;
import io.netty.util.ResourceLeakDetector;
import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Fuzzes the Netty link's {@link FrameDecoder} on an {@link EmbeddedChannel}. The first byte
 * sets how many bytes each read carries (1 to 256), so frames cross read boundaries at every
 * offset; bit 0 of the second byte makes the next handler suspend the decoder after every frame
 * (and the test resume it), as a receiver pushing back does. The rest is the byte stream.
 *
 * <p>Whatever the stream, the frames passed up re-encode to a prefix of it (the whole of it if
 * no error was raised), each within its type's length limit; at most one error is raised and it
 * is a {@link CorruptedFrameException}; and once the frames are released and the channel closed,
 * no buffer is left referenced.
 */
class FrameDecoderFuzzTest {

    static final int MAX_PAYLOAD = 1 << 16;

    static {
        // While fuzzing, the test's own reference counts are the leak check: Netty's paranoid
        // detector (on for the module's tests) records a stack per buffer and slows it 10-fold.
        if (System.getenv("JAZZER_FUZZ") != null) {
            ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.DISABLED);
        }
    }

    @FuzzTest
    void decode(byte[] data) {
        if (data.length < 2) {
            return;
        }
        int chunk = 1 + (data[0] & 0xff);
        boolean suspendEach = (data[1] & 1) != 0;
        FrameDecoder decoder = new FrameDecoder(MAX_PAYLOAD);
        List<Frame> frames = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        int[] passedUp = new int[1];
        EmbeddedChannel channel = new EmbeddedChannel(decoder, new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                frames.add((Frame) msg);
                passedUp[0]++;
                if (suspendEach) {
                    decoder.suspend();
                }
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                errors.add(cause);
            }
        });
        List<ByteBuf> reads = new ArrayList<>();
        ByteArrayOutputStream decoded = new ByteArrayOutputStream();
        try {
            for (int at = 2; at < data.length; at += chunk) {
                int n = Math.min(chunk, data.length - at);
                ByteBuf read = Unpooled.directBuffer(n).writeBytes(data, at, n);
                reads.add(read);
                channel.writeInbound(read);
                while (decoder.isSuspended()) {
                    int before = passedUp[0];
                    decoder.resume();
                    drain(frames, decoded);
                    if (passedUp[0] == before && decoder.isSuspended()) {
                        throw new AssertionError("resume passed nothing up and stayed suspended");
                    }
                }
                drain(frames, decoded);
            }
            channel.finish();
            drain(frames, decoded);
        } finally {
            frames.forEach(f -> f.payload().release());
            frames.clear();
            channel.finishAndReleaseAll();
        }
        assertTrue(errors.size() <= 1, () -> "errors " + errors);
        for (Throwable e : errors) {
            if (!(e instanceof CorruptedFrameException)) {
                throw new AssertionError("not a CorruptedFrameException", e);
            }
        }
        byte[] stream = Arrays.copyOfRange(data, 2, data.length);
        byte[] frameBytes = decoded.toByteArray();
        assertTrue(frameBytes.length <= stream.length);
        assertArrayEquals(Arrays.copyOf(stream, frameBytes.length), frameBytes, "frames are not the stream");
        if (errors.isEmpty()) {
            assertEquals(stream.length, frameBytes.length, "bytes left over without an error");
        }
        for (ByteBuf read : reads) {
            assertEquals(0, read.refCnt(), "a read buffer is still referenced");
        }
    }

    /** Checks and re-encodes the frames passed up so far, and releases them. */
    private static void drain(List<Frame> frames, ByteArrayOutputStream decoded) {
        List<Frame> batch = new ArrayList<>(frames);
        frames.clear();
        for (Frame frame : batch) {
            ByteBuf payload = frame.payload();
            try {
                check(frame, decoded);
            } finally {
                payload.release();
            }
        }
    }

    private static void check(Frame frame, ByteArrayOutputStream decoded) {
        ByteBuf payload = frame.payload();
        int length = payload.readableBytes();
        int limit = switch (frame.type()) {
            case FrameDescriptor.TYPE_DATA -> MAX_PAYLOAD;
            case FrameDescriptor.TYPE_HELLO, FrameDescriptor.TYPE_CHALLENGE, FrameDescriptor.TYPE_PROOF,
                    FrameDescriptor.TYPE_WELCOME -> FrameDescriptor.MAX_HELLO_LENGTH;
            default -> throw new AssertionError("passed up a frame of type " + frame.type());
        };
        assertTrue(length <= limit, () -> "payload of " + length + " bytes beyond " + limit);
        ByteBuf header = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH, FrameDescriptor.HEADER_LENGTH);
        FrameDescriptor.writeHeader(header, 0, frame.type(), frame.stream(), length);
        decoded.writeBytes(header.array());
        byte[] bytes = new byte[length];
        payload.getBytes(payload.readerIndex(), bytes);
        decoded.writeBytes(bytes);
    }
}
