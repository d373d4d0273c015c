package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.stream.Stream;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The parameter server's transport settings: what they change, and pulls through them. */
class PsTransportTest extends PsNetTestBase {

    /** What the next cluster's transports send by reference (the tuned setting unless a test changes it). */
    private long sharedSendBytes = PsTransport.SHARED_SEND_BYTES;

    @Override
    TransportConfig config(String provider) {
        return PsTransport.tune(transport(provider)).withSharedSendBytes(sharedSendBytes);
    }

    static Stream<String> fabricProviders() {
        return providers().filter(p -> !p.equals("netty"));
    }

    @Test
    void tuneSetsTheEagerThresholdReceiveBuffersAndIdlePollingAndKeepsTheRest() {
        TransportConfig base = TransportConfig.defaults("shm").withPools(8L << 20, 16L << 20, 32L << 20)
                .withLinks(3, 100).withConnectTimeoutMillis(1234);
        TransportConfig tuned = PsTransport.tune(base);
        assertEquals(PsTransport.EAGER_BYTES, tuned.eagerThreshold());
        assertEquals(PsTransport.RECEIVE_BUFFERS_PER_LINK, tuned.receiveBuffersPerLink());
        assertEquals(PsTransport.MIN_RECEIVE_POOL_BYTES, tuned.receivePoolBytes());
        assertEquals(0, tuned.idlePollMicros(), "no polling after the spin");
        assertEquals(base.withFlowControl(tuned.eagerThreshold(), tuned.receiveBuffersPerLink(),
                base.sendWindowBytesPerLink(), base.sendWindowBytesPerPeer(), base.sendWindowBytesPerProcess())
                .withPools(base.sendPoolBytes(), tuned.receivePoolBytes(), base.rendezvousPoolBytes())
                .withIdlePollMicros(PsTransport.IDLE_POLL_MICROS).withSharedSendBytes(PsTransport.SHARED_SEND_BYTES), tuned);
        assertEquals(4 << 10, tuned.sharedSendBytes(), "messages of 4 KiB and up by reference on one host");
        TransportConfig big = base.withPools(8L << 20, 512L << 20, 32L << 20);
        assertEquals(512L << 20, PsTransport.tune(big).receivePoolBytes(), "a larger pool is kept");
        // A receive buffer of the tuned size is one 256 KiB class with room for a frame header.
        assertTrue(PsTransport.EAGER_BYTES + 64 <= 256 << 10);
    }

    @ParameterizedTest
    @MethodSource("fabricProviders")
    void pullResponsesUpToTheThresholdGoInOneSend(String provider) {
        sharedSendBytes = 0; // through the provider, as between hosts
        Cluster c = cluster(provider, 1, PsConfig.defaults(), null);
        int d = 64;
        TableConfig t = TableConfig.of("emb", d, Optimizer.sgd(0.1)).withInitializer(Initializer.uniform(-1, 1, 3));
        c.client().createTable(t);
        // 900 rows of 256 bytes: 230,400 bytes, fourteen times the transport's default threshold.
        long[] ids = new long[900];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 3L;
        }
        float[] expected;
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(t);
            expected = new float[ids.length * d];
            local.pull("emb", d, ids, 0, ids.length, java.lang.foreign.MemorySegment.ofArray(expected));
        }
        TransportCounters before = c.rpcServers().getFirst().rpcServer().transports().getLast().counters();
        for (int i = 0; i < 5; i++) {
            float[] out = new float[ids.length * d];
            c.client().pull("emb", ids, 0, ids.length, out);
            assertArrayEquals(expected, out, "rows of pull " + i);
        }
        // The server counts a send just after posting it, so the last response can reach the
        // client a moment before it is counted.
        dev.ferry.transport.Transport server = c.rpcServers().getFirst().rpcServer().transports().getLast();
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (server.counters().eagerSent() - before.eagerSent() < 5 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        TransportCounters after = server.counters();
        assertEquals(before.rendezvousSent(), after.rendezvousSent(), "a response under the threshold went by rendezvous");
        assertTrue(after.eagerSent() - before.eagerSent() >= 5, "the responses were not counted as eager sends");
    }

    /** The libfabric providers: the in-JVM transport hands messages over as they are, without references. */
    static Stream<String> libfabricProviders() {
        return fabricProviders().filter(p -> !p.equals("local"));
    }

    @ParameterizedTest
    @MethodSource("libfabricProviders")
    void pullResponsesOnOneHostGoByReferenceAndReadAsPulled(String provider) {
        Cluster c = cluster(provider, 1, PsConfig.defaults(), null);
        int d = 64;
        TableConfig t = TableConfig.of("emb", d, Optimizer.sgd(0.1)).withInitializer(Initializer.uniform(-1, 1, 5));
        c.client().createTable(t);
        long[] ids = new long[900]; // 230,400 bytes of rows: above the 4 KiB of a reference
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 7L + 1;
        }
        float[] expected;
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(t);
            expected = new float[ids.length * d];
            local.pull("emb", d, ids, 0, ids.length, java.lang.foreign.MemorySegment.ofArray(expected));
        }
        dev.ferry.transport.Transport server = c.rpcServers().getFirst().rpcServer().transports().getLast();
        TransportCounters before = server.counters();
        long sendBytesBefore = sendBytes(server);
        for (int i = 0; i < 5; i++) {
            float[] out = new float[ids.length * d];
            c.client().pull("emb", ids, 0, ids.length, out);
            assertArrayEquals(expected, out, "rows of pull " + i);
        }
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (server.counters().rendezvousSent() - before.rendezvousSent() < 5 && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        TransportCounters after = server.counters();
        assertEquals(5, after.rendezvousSent() - before.rendezvousSent(), "responses by reference");
        // Each response's buffer comes back once the client has read it (its release rides the
        // client's next request, or goes at the credit review).
        deadline = System.nanoTime() + 5_000_000_000L;
        while (sendBytes(server) > sendBytesBefore && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        // At most what was in use before the pulls (a reply of the table's creation may still
        // have been in flight then): none of the five responses' buffers is still held.
        long inUse = sendBytes(server);
        assertTrue(inUse <= sendBytesBefore, "the server's send buffers came back: " + inUse + " bytes in use, "
                + sendBytesBefore + " before");
    }

    private static long sendBytes(dev.ferry.transport.Transport server) {
        return server.allocatorStats().orElseThrow().pool(dev.ferry.memory.PoolKind.SEND).bytesInUse();
    }
}
