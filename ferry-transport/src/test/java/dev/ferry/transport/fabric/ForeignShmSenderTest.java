package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * shm's one shared endpoint takes frames from any process on the host that knows its name
 * ({@code fi_shm://<pid>:0:0}, guessable). A frame counts only if it comes from a peer that
 * authenticated on the control channel, even when it names a live link's id: the link id is
 * not a proof, the link's token is (see {@link FrameDescriptor}).
 *
 * <p>On libfabric 1.17's shm the provider's source address for the stranger's frames does not
 * tell them from the peer's (so the check against the sender in {@code ReceiveDispatcher}
 * passes): before frames carried their link's token, the stranger's three frames were
 * delivered as the link's messages. (A stranger in the same process as the transport even
 * crashed it, SIGSEGV in {@code fi_cq_readfrom}; this test keeps it in its own process.)
 */
@Timeout(60)
class ForeignShmSenderTest extends FabricTransportFixture {

    @Test
    void aFrameFromAProcessThatNeverAuthenticatedIsDropped() throws Exception {
        TransportConfig config = TransportConfig.defaults("shm").withPools(16L << 20, 16L << 20, 16L << 20);
        List<String> delivered = new CopyOnWriteArrayList<>();
        AtomicReference<Peer> serverSide = new AtomicReference<>();
        Transport server = open(config, (from, m) -> {
            delivered.add(new String(m.segment().toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8));
            serverSide.set(from);
            m.release();
        });
        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        send(peer, "before");
        assertTrue(waitFor(() -> delivered.size() == 1, 10_000));
        int linkId = ((FabricPeer) serverSide.get()).links[0].id;

        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        Process stranger = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xmx128m", "-cp", classpath,
                ShmStranger.class.getName(), HexFormat.of().formatHex(((FabricTransport) server).fabricAddress()),
                Integer.toString(linkId), "127.0.0.3").redirectErrorStream(true).start();
        String output;
        try {
            output = new String(stranger.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(stranger.waitFor(30, TimeUnit.SECONDS), "the stranger did not finish");
        } finally {
            stranger.destroyForcibly();
        }
        assertTrue(output.contains("INJECTED 3"), output);
        Thread.sleep(200);
        send(peer, "after");
        assertTrue(waitFor(() -> delivered.size() >= 2, 10_000));
        Thread.sleep(100);
        assertEquals(List.of("before", "after"), delivered);
        assertTrue(peer.isOpen(), "a stranger's frame failed the peer's link");
        assertEquals(3, server.counters().authenticationFailures(), "the stranger's frames, dropped and counted");
        assertEquals(0, server.counters().linkFailures());
    }

    private static void send(Peer peer, String text) throws Exception {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        var message = peer.allocate(bytes.length);
        MemorySegment.copy(bytes, 0, message.segment(), ValueLayout.JAVA_BYTE, 0, bytes.length);
        peer.send(1, message).get(10, TimeUnit.SECONDS);
    }
}
