package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;

/**
 * Many connected peers on one receiver share its receive pool through a shared receive context:
 * the credits they hold together never exceed the buffers the pool can post, although a queue
 * of {@code receiveBuffersPerLink} per link would need several times the pool, and every peer's
 * messages arrive, in order.
 */
@Timeout(120)
class SharedReceivePoolTest extends FabricTransportFixture {

    private static final int PEERS = 32;
    private static final int MESSAGES = 100;

    @Test
    void thirtyTwoTcpPeersShareOneBoundedReceivePool() throws Exception {
        long receivePool = 8L << 20;
        TransportConfig serverConfig = TransportConfig.defaults("tcp").withPools(2L << 20, receivePool, 2L << 20);
        ConcurrentHashMap<Integer, List<Integer>> seen = new ConcurrentHashMap<>();
        Transport server = open(serverConfig, (from, m) -> {
            int key = m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0);
            seen.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>())
                    .add(m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 4));
            m.release();
        });
        assumeTrue(((FabricTransport) server).sharesReceiveQueue(), "tcp offers no shared receive context here");
        // Receive buffers (header and eager payload) come from a power-of-two size class.
        long poolBuffers = receivePool / (Long.highestOneBit(FrameDescriptor.HEADER + serverConfig.eagerThreshold()) << 1);
        long perLinkQueues = (long) PEERS * (serverConfig.receiveBuffersPerLink() + ReceiveCredits.RESERVE);
        assertTrue(perLinkQueues > 2 * poolBuffers, "the pool must be too small for a queue per link");

        TransportConfig clientConfig = TransportConfig.defaults("tcp").withPools(1L << 20, 1L << 20, 1L << 20);
        Transport[] clients = new Transport[PEERS];
        Peer[] peers = new Peer[PEERS];
        for (int c = 0; c < PEERS; c++) {
            clients[c] = open(clientConfig, (from, m) -> m.release());
            peers[c] = clients[c].connect(server.localAddress());
        }
        assertTrue(heldCredits(clients) <= poolBuffers, () -> "peers hold " + heldCredits(clients)
                + " credits for " + poolBuffers + " buffers");

        // Every peer sends at once; even peers on two streams, whose second link opens on the
        // context too where the pool has credits left to grant, and shares the first otherwise.
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        for (int i = 0; i < MESSAGES; i++) {
            for (int c = 0; c < PEERS; c++) {
                int stream = c % 2 == 0 ? i % 2 : 0;
                OutboundMessage m = peers[c].allocate(64);
                m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 0, c * 2 + stream);
                m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 4, i);
                sends.add(peers[c].send(stream, m));
            }
            long held = heldCredits(clients);
            assertTrue(held <= poolBuffers, () -> "peers hold " + held + " credits for " + poolBuffers + " buffers");
        }
        for (CompletableFuture<Void> f : sends) {
            f.get(60, TimeUnit.SECONDS);
        }
        for (int c = 0; c < PEERS; c++) {
            for (int stream = 0; stream < (c % 2 == 0 ? 2 : 1); stream++) {
                int key = c * 2 + stream;
                int expected = c % 2 == 0 ? MESSAGES / 2 : MESSAGES;
                assertTrue(waitFor(() -> seen.getOrDefault(key, List.of()).size() == expected, 10_000),
                        "messages of peer " + c + " stream " + stream);
                List<Integer> order = seen.get(key);
                for (int i = 1; i < order.size(); i++) {
                    assertTrue(order.get(i) > order.get(i - 1), "order of peer " + c + " stream " + stream);
                }
            }
        }
        TransportCounters s = server.counters();
        assertEquals(0, s.linkFailures(), s::toString);
        assertEquals(0, s.receiveBuffersHeld(), s::toString);
        assertEquals((long) PEERS * MESSAGES, s.messagesReceived());
        assertTrue(heldCredits(clients) <= poolBuffers);
    }

    private static long heldCredits(Transport[] clients) {
        long held = 0;
        for (Transport client : clients) {
            if (client != null) {
                held += client.counters().creditsAvailable();
            }
        }
        return held;
    }
}
