package dev.ferry.transport.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the seed inputs of {@link FrameDecoderFuzzTest} with {@link FrameDescriptor}'s encoder
 * (run from the module directory; see docs/fuzzing.md): a HELLO then DATA frames, cut into reads
 * of 1, 7, 64 and 256 bytes, with and without a receiver that suspends after every frame.
 */
public final class NettyFuzzSeeds {

    private NettyFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0]
                : "src/test/resources/dev/ferry/transport/netty/FrameDecoderFuzzTestInputs/decode");
        Files.createDirectories(dir);
        ByteBuf stream = Unpooled.buffer();
        frame(stream, FrameDescriptor.TYPE_HELLO, 0, "127.0.0.1:40123".getBytes(StandardCharsets.UTF_8));
        frame(stream, FrameDescriptor.TYPE_DATA, 1, new byte[0]);
        frame(stream, FrameDescriptor.TYPE_DATA, 1, "hello".getBytes(StandardCharsets.UTF_8));
        byte[] big = new byte[700];
        for (int i = 0; i < big.length; i++) {
            big[i] = (byte) i;
        }
        frame(stream, FrameDescriptor.TYPE_DATA, 7, big);
        byte[] frames = new byte[stream.readableBytes()];
        stream.readBytes(frames);
        int[] chunks = {1, 7, 64, 256};
        for (int chunk : chunks) {
            for (int suspend = 0; suspend < 2; suspend++) {
                byte[] seed = new byte[2 + frames.length];
                seed[0] = (byte) (chunk - 1);
                seed[1] = (byte) suspend;
                System.arraycopy(frames, 0, seed, 2, frames.length);
                Files.write(dir.resolve("frames-chunk" + chunk + (suspend == 1 ? "-suspend" : "")), seed);
            }
        }
    }

    private static void frame(ByteBuf out, byte type, int stream, byte[] payload) {
        int at = out.writerIndex();
        out.writeZero(FrameDescriptor.HEADER_LENGTH);
        FrameDescriptor.writeHeader(out, at, type, stream, payload.length);
        out.writeBytes(payload);
    }
}
