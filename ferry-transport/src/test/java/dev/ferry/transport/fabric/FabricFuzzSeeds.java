package dev.ferry.transport.fabric;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the seed inputs of {@link FrameDescriptorFuzzTest} and {@link HandshakeFuzzTest} with
 * the encoders, into {@code src/test/resources} (run from the module directory; see
 * docs/fuzzing.md). The seeds are committed: this only remakes them after a format change.
 */
public final class FabricFuzzSeeds {

    private FabricFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path root = Path.of(args.length > 0 ? args[0] : "src/test/resources/dev/ferry/transport/fabric");
        Path frames = root.resolve("FrameDescriptorFuzzTestInputs/frame");
        Files.createDirectories(frames);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment eager = arena.allocate(FrameDescriptor.HEADER + 100);
            FrameDescriptor.header(eager, FrameDescriptor.EAGER, 7, 0x1234, 0x5eed1234, 3, 100, 0);
            eager.asSlice(FrameDescriptor.HEADER).fill((byte) 'x');
            write(frames.resolve("eager-100"), eager);
            MemorySegment empty = arena.allocate(FrameDescriptor.HEADER);
            FrameDescriptor.header(empty, FrameDescriptor.EAGER, 0, 1, 0x5eed0001, 0, 0, 0);
            write(frames.resolve("eager-empty"), empty);
            MemorySegment rndv = arena.allocate(FrameDescriptor.RNDV_REQ_BYTES);
            FrameDescriptor.header(rndv, FrameDescriptor.RNDV_REQ, 2, 9, 0x5eed0009, 1, 1 << 20, 0x55aa);
            FrameDescriptor.rendezvous(rndv, 0x7f0000001000L, 0xabcdefL);
            write(frames.resolve("rendezvous-request"), rndv);
            MemorySegment shared = arena.allocate(FrameDescriptor.RNDV_REQ_BYTES);
            FrameDescriptor.header(shared, FrameDescriptor.RNDV_SHARED, 2, 9, 0x5eed0009, 1, 48 << 10, 0x55ab);
            FrameDescriptor.shared(shared, 0x10030, 3, 17);
            write(frames.resolve("shared-reference"), shared);
            MemorySegment releases = arena.allocate(FrameDescriptor.HEADER + 24);
            FrameDescriptor.header(releases, FrameDescriptor.RELEASES, 1, 9, 0x5eed0009, 0, 3, 0);
            for (int i = 0; i < 3; i++) {
                FrameDescriptor.released(releases, i, 0x55aa + i);
            }
            write(frames.resolve("releases-3"), releases);
            byte[] controls = {FrameDescriptor.RNDV_DONE, FrameDescriptor.CREDIT, FrameDescriptor.RECLAIM,
                    FrameDescriptor.YIELD};
            for (byte type : controls) {
                MemorySegment control = arena.allocate(FrameDescriptor.HEADER);
                FrameDescriptor.header(control, type, 16, 9, 0x5eed0009, 0, 0, type == FrameDescriptor.RNDV_DONE ? 0x55aa : 12);
                write(frames.resolve("control-" + type), control);
            }
        }
        Path handshakes = root.resolve("HandshakeFuzzTestInputs/handshake");
        Files.createDirectories(handshakes);
        Files.write(handshakes.resolve("acceptor-reads-dialer"), dialerStream(true));
        Files.write(handshakes.resolve("acceptor-reads-dialer-no-secret"), dialerStream(false));
        Files.write(handshakes.resolve("dialer-reads-acceptor"), acceptorStream(false));
        Files.write(handshakes.resolve("dialer-reads-refusal"), acceptorStream(true));
    }

    private static void write(Path file, MemorySegment frame) throws IOException {
        Files.write(file, frame.toArray(ValueLayout.JAVA_BYTE));
    }

    /** What a dialer sends: greeting, proof, hello (first byte 0: the acceptor's side). */
    private static byte[] dialerStream(boolean secret) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeByte(0);
        HandshakeDescriptor.writeGreeting(out, secret, new byte[16]);
        HandshakeDescriptor.writeBytes(out, new byte[secret ? 32 : 0]);
        HandshakeDescriptor.writeHello(out, new HandshakeDescriptor.Hello("127.0.0.1:40123", FABRIC_ADDRESS,
                new int[] {0x11111111, 0x22222222}, new int[] {0x7a7a7a7a, 0x7b7b7b7b}, new int[] {64, 64}, 8192,
                "/dev/shm/ferry-doorbell-1234-1", 1234, 7, "ferry-8000000000000001", false));
        return bytes.toByteArray();
    }

    /** What an acceptor answers: its challenge, then its answer to a hello of one link (first byte 1). */
    private static byte[] acceptorStream(boolean refuse) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeByte(1);
        if (refuse) {
            HandshakeDescriptor.writeRefusal(out, "this side requires the shared secret");
            return bytes.toByteArray();
        }
        HandshakeDescriptor.writeChallenge(out, new byte[16], new byte[32]);
        HandshakeDescriptor.writeAnswer(out, new HandshakeDescriptor.Hello(null, FABRIC_ADDRESS,
                new int[] {0x33333333}, new int[] {0x7c7c7c7c}, new int[] {64}, 4096, "", 1235, 9,
                "ferry-8000000000000002", true));
        return bytes.toByteArray();
    }

    private static final byte[] FABRIC_ADDRESS = {2, 0, (byte) 0x9c, 0x7b, 127, 0, 0, 1};
}
