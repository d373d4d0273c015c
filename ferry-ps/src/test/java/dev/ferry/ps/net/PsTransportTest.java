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

    @Override
    TransportConfig config(String provider) {
        return PsTransport.tune(transport(provider));
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
                .withIdlePollMicros(PsTransport.IDLE_POLL_MICROS), tuned);
        TransportConfig big = base.withPools(8L << 20, 512L << 20, 32L << 20);
        assertEquals(512L << 20, PsTransport.tune(big).receivePoolBytes(), "a larger pool is kept");
        // A receive buffer of the tuned size is one 256 KiB class with room for a frame header.
        assertTrue(PsTransport.EAGER_BYTES + 64 <= 256 << 10);
    }

    @ParameterizedTest
    @MethodSource("fabricProviders")
    void pullResponsesUpToTheThresholdGoInOneSend(String provider) {
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
}
