package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.CorruptedFrameException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@link FrameDecoder} without I/O: good frames in pieces, bad frames, suspension. */
@Timeout(10)
class FrameDecoderTest {

    private static final int MAX = 1024;

    private final List<Throwable> errors = new ArrayList<>();
    private final EmbeddedChannel channel = new EmbeddedChannel(new FrameDecoder(MAX), new ChannelInboundHandlerAdapter() {
        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            errors.add(cause);
            ctx.close();
        }
    });

    private static ByteBuf frame(byte type, int stream, byte[] payload) {
        ByteBuf buffer = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH + payload.length);
        FrameDescriptor.writeHeader(buffer, 0, type, stream, payload.length);
        buffer.writerIndex(FrameDescriptor.HEADER_LENGTH).writeBytes(payload);
        return buffer;
    }

    private static byte[] bytes(int n) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (i * 31 + 7);
        }
        return b;
    }

    private Frame read() {
        return channel.readInbound();
    }

    private static void assertFrame(Frame frame, byte type, int stream, byte[] payload) {
        try {
            assertEquals(type, frame.type());
            assertEquals(stream, frame.stream());
            byte[] got = new byte[frame.payload().readableBytes()];
            frame.payload().getBytes(frame.payload().readerIndex(), got);
            assertEquals(new String(payload, StandardCharsets.ISO_8859_1), new String(got, StandardCharsets.ISO_8859_1));
        } finally {
            frame.payload().release();
        }
    }

    @Test
    void framesInOneBufferComeOutAsSlicesInOrder() {
        ByteBuf all = Unpooled.buffer();
        all.writeBytes(frame(FrameDescriptor.TYPE_HELLO, 0, "127.0.0.1:9".getBytes(StandardCharsets.UTF_8)));
        all.writeBytes(frame(FrameDescriptor.TYPE_DATA, 3, bytes(0)));
        all.writeBytes(frame(FrameDescriptor.TYPE_DATA, -4, bytes(100)));
        channel.writeInbound(all);
        assertFrame(read(), FrameDescriptor.TYPE_HELLO, 0, "127.0.0.1:9".getBytes(StandardCharsets.UTF_8));
        assertFrame(read(), FrameDescriptor.TYPE_DATA, 3, bytes(0));
        assertFrame(read(), FrameDescriptor.TYPE_DATA, -4, bytes(100));
        assertNull(read());
        assertTrue(errors.isEmpty());
        assertFalse(channel.finish());
    }

    @Test
    void framesSplitAnywhereAreReassembled() {
        ByteBuf all = Unpooled.buffer();
        all.writeBytes(frame(FrameDescriptor.TYPE_DATA, 1, bytes(MAX)));
        all.writeBytes(frame(FrameDescriptor.TYPE_DATA, 2, bytes(5)));
        while (all.isReadable()) {
            channel.writeInbound(all.readRetainedSlice(Math.min(7, all.readableBytes())));
        }
        all.release();
        assertFrame(read(), FrameDescriptor.TYPE_DATA, 1, bytes(MAX));
        assertFrame(read(), FrameDescriptor.TYPE_DATA, 2, bytes(5));
        assertTrue(errors.isEmpty());
        assertFalse(channel.finish());
    }

    @Test
    void unknownTypeClosesTheChannel() {
        channel.writeInbound(frame((byte) 9, 1, bytes(4)));
        assertNull(read());
        assertInstanceOf(CorruptedFrameException.class, errors.get(0));
        assertTrue(errors.get(0).getMessage().contains("unknown frame type 9"), errors.get(0).getMessage());
        assertFalse(channel.isOpen());
    }

    @Test
    void lengthBeyondTheLimitClosesTheChannel() {
        ByteBuf header = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        FrameDescriptor.writeHeader(header, 0, FrameDescriptor.TYPE_DATA, 1, MAX + 1);
        header.writerIndex(FrameDescriptor.HEADER_LENGTH);
        channel.writeInbound(header);
        assertNull(read());
        assertTrue(errors.get(0).getMessage().contains("beyond the limit"), errors.get(0).getMessage());
        assertFalse(channel.isOpen());
    }

    @Test
    void negativeLengthAndBadVersionAreGarbage() {
        ByteBuf bad = Unpooled.buffer(FrameDescriptor.HEADER_LENGTH);
        FrameDescriptor.writeHeader(bad, 0, FrameDescriptor.TYPE_DATA, 1, -5);
        bad.writerIndex(FrameDescriptor.HEADER_LENGTH);
        channel.writeInbound(bad);
        assertInstanceOf(CorruptedFrameException.class, errors.get(0));

        List<Throwable> otherErrors = new ArrayList<>();
        EmbeddedChannel other = new EmbeddedChannel(new FrameDecoder(MAX), new ChannelInboundHandlerAdapter() {
            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                otherErrors.add(cause);
                ctx.close();
            }
        });
        ByteBuf version = frame(FrameDescriptor.TYPE_DATA, 1, bytes(2));
        version.setByte(FrameDescriptor.VERSION_OFFSET, 7);
        other.writeInbound(version);
        assertNull(other.readInbound());
        assertTrue(otherErrors.get(0).getMessage().contains("version 7"), otherErrors.get(0).getMessage());
        assertFalse(other.isOpen());
    }

    @Test
    void truncatedHeaderIsReportedWhenTheConnectionEnds() {
        ByteBuf partial = frame(FrameDescriptor.TYPE_DATA, 1, bytes(10)).writerIndex(5);
        channel.writeInbound(partial);
        assertNull(read());
        assertTrue(errors.isEmpty());
        channel.close();
        assertInstanceOf(CorruptedFrameException.class, errors.get(0));
        assertTrue(errors.get(0).getMessage().contains("inside a frame header"), errors.get(0).getMessage());
    }

    @Test
    void truncatedPayloadIsReportedWhenTheConnectionEnds() {
        ByteBuf partial = frame(FrameDescriptor.TYPE_DATA, 1, bytes(100));
        partial.writerIndex(FrameDescriptor.HEADER_LENGTH + 40);
        channel.writeInbound(partial);
        assertNull(read());
        channel.close();
        assertTrue(errors.get(0).getMessage().contains("inside a frame of 100 bytes"), errors.get(0).getMessage());
    }

    @Test
    void suspendedDecoderHoldsTheRestUntilResumed() {
        FrameDecoder decoder = channel.pipeline().get(FrameDecoder.class);
        List<Frame> seen = new ArrayList<>();
        channel.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                seen.add((Frame) msg);
                decoder.suspend();
            }
        });
        ByteBuf all = Unpooled.buffer();
        for (int i = 0; i < 3; i++) {
            all.writeBytes(frame(FrameDescriptor.TYPE_DATA, i, bytes(i + 1)));
        }
        channel.writeInbound(all);
        assertEquals(1, seen.size());
        assertFalse(channel.config().isAutoRead());
        decoder.resume();
        assertEquals(2, seen.size());
        decoder.resume();
        assertEquals(3, seen.size());
        decoder.resume();
        assertTrue(channel.config().isAutoRead());
        for (int i = 0; i < 3; i++) {
            assertFrame(seen.get(i), FrameDescriptor.TYPE_DATA, i, bytes(i + 1));
        }
        assertFalse(channel.finish());
    }
}
