package dev.ferry.transport.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.FabricSession;

/**
 * The stranger of {@link ForeignShmSenderTest}: another process on the host that opens its own
 * shm endpoint and injects frames naming a live link's id (with guessed tokens) into a
 * transport's endpoint, without ever talking to its control channel. Arguments: the endpoint's name (hex), the link id, a
 * loopback host for this process's own region.
 */
public final class ShmStranger {

    private ShmStranger() {
    }

    public static void main(String[] args) throws Exception {
        byte[] name = HexFormat.of().parseHex(args[0]);
        int linkId = Integer.parseInt(args[1]);
        try (FabricSession stranger = FabricSession.open("shm", EndpointType.RDM, args[2], false, 64);
             Arena arena = Arena.ofConfined()) {
            FabricSession.Connection to = stranger.connect(name, 0);
            byte[] text = "injected".getBytes(StandardCharsets.UTF_8);
            MemorySegment frame = arena.allocate(FrameDescriptor.HEADER + text.length, 8);
            MemorySegment.copy(text, 0, frame, ValueLayout.JAVA_BYTE, FrameDescriptor.HEADER, text.length);
            // The link's token is not known here: the old zero, a small guess, a random one.
            int[] guesses = {0, 1, new java.security.SecureRandom().nextInt()};
            int sent = 0;
            CompletionBatch batch = new CompletionBatch(16);
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (sent < 3 && System.nanoTime() < deadline) {
                FrameDescriptor.header(frame, FrameDescriptor.EAGER, 0, linkId, guesses[sent], 1, text.length, 0);
                if (to.endpoint().inject(frame.address(), frame.byteSize(), to.peer())) {
                    sent++;
                } else {
                    stranger.completionQueue().read(batch); // shm connects to a new peer first
                    Thread.sleep(1);
                }
            }
            System.out.println("INJECTED " + sent);
        }
    }
}
