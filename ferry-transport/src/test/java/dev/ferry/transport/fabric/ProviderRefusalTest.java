package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * What the provider refuses outright. A rendezvous payload it will not register: a send someone
 * watches fails alone, with {@code LIMIT_REACHED}, and the stream goes on in order behind it; a
 * send nobody watches ({@link Peer#sendAndForget}) fails its peer, the only way its failure can
 * show, instead of leaving a gap in the stream that nobody hears of. A send it will not post (an
 * error other than a full queue): the link fails with the provider's reason, and the transport
 * and its other peers go on. Nothing is left taken.
 */
@Timeout(60)
class ProviderRefusalTest extends FabricTransportFixture {

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aWatchedSendFailsAloneAndTheStreamGoesOnInOrder(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int large = 2 * config.eagerThreshold();
        List<Long> arrived = new CopyOnWriteArrayList<>();
        Queue<String> damaged = new ConcurrentLinkedQueue<>();
        Transport receiver = open(config, (from, m) -> {
            long seq = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(m.segment(), 0, seq);
            if (bad != null) {
                damaged.add(bad);
            }
            arrived.add(seq);
            m.release();
        });
        Transport sender = open(config, (from, m) -> m.release());
        FabricTransport fabric = (FabricTransport) sender;
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendPoolBuffers(sender);

        sendSeq(peer, 0, 64).get(10, TimeUnit.SECONDS);
        fabric.rendezvousKeys.refuseForTest(1);
        CompletableFuture<Void> refused = sendSeq(peer, 1, large);
        CompletableFuture<Void> after = sendSeq(peer, 2, 64);
        CompletableFuture<Void> largeAfter = sendSeq(peer, 3, large);

        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> refused.get(10, TimeUnit.SECONDS));
        TransportException cause = assertInstanceOf(TransportException.class, e.getCause());
        assertEquals(TransportException.Reason.LIMIT_REACHED, cause.reason(), cause.getMessage());
        after.get(10, TimeUnit.SECONDS);
        largeAfter.get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> arrived.size() == 3, 10_000), "arrived: " + arrived);
        assertEquals(List.of(0L, 2L, 3L), arrived, "what arrived, in order");
        assertTrue(damaged.isEmpty(), "damaged: " + damaged.peek());
        assertTrue(peer.isOpen(), "a refused registration of a watched send fails that send alone");
        assertNothingLeft(sender, buffersBefore);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void anUnwatchedSendFailsItsPeerWithTheReason(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int large = 2 * config.eagerThreshold();
        List<Long> arrived = new CopyOnWriteArrayList<>();
        Transport receiver = open(config, (from, m) -> {
            arrived.add(m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            m.release();
        });
        AtomicReference<Throwable> closed = new AtomicReference<>();
        Transport sender = open(config, releasing(closed));
        FabricTransport fabric = (FabricTransport) sender;
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendPoolBuffers(sender);

        sendSeq(peer, 0, 64).get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> arrived.size() == 1, 10_000), "the first send did not arrive"); // before the refusal
        fabric.rendezvousKeys.refuseForTest(1);
        OutboundMessage forgotten = peer.allocate(large);
        fill(forgotten.segment(), 0, 1);
        peer.sendAndForget(0, forgotten);

        assertTrue(waitFor(() -> closed.get() != null, 10_000), "the peer was not failed");
        assertTrue(closed.get().getMessage().contains("cannot register a rendezvous payload"), closed.get().getMessage());
        assertFalse(peer.isOpen());
        assertEquals(List.of(0L), arrived, "nothing after the refused send arrived");
        assertNothingLeft(sender, buffersBefore);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aRefusedSendFailsItsLinkAndTheTransportGoesOn(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        List<Long> first = new CopyOnWriteArrayList<>();
        List<Long> second = new CopyOnWriteArrayList<>();
        Transport one = open(config, (from, m) -> {
            first.add(m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            m.release();
        });
        Transport two = open(config, (from, m) -> {
            second.add(m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            m.release();
        });
        AtomicReference<Throwable> closed = new AtomicReference<>();
        Transport sender = open(config, releasing(closed));
        FabricTransport fabric = (FabricTransport) sender;
        Peer refused = sender.connect(one.localAddress());
        sendSeq(refused, 0, 64).get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> first.size() == 1, 10_000), "the first send did not arrive"); // before the refusal
        long buffersBefore = sendPoolBuffers(sender);

        fabric.sends.refuseForTest(1);
        CompletableFuture<Void> failed = sendSeq(refused, 1, 64); // from this thread or the progress thread
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> failed.get(10, TimeUnit.SECONDS));
        TransportException cause = assertInstanceOf(TransportException.class, e.getCause());
        assertEquals(TransportException.Reason.PEER_FAILED, cause.reason(), cause.getMessage());
        assertTrue(cause.getMessage().contains("send refused by the provider"), cause.getMessage());
        assertTrue(waitFor(() -> closed.get() != null, 10_000), "the peer was not failed");
        assertFalse(refused.isOpen());
        assertEquals(List.of(0L), first, "the refused send did not arrive");

        Peer other = sender.connect(two.localAddress()); // the progress thread is still there
        for (long seq = 0; seq < 100; seq++) {
            sendSeq(other, seq, 64 + (int) seq * 97).get(10, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> second.size() == 100, 10_000), "arrived at the other peer: " + second.size());
        for (int i = 0; i < 100; i++) {
            assertEquals(i, second.get(i), "order at the other peer");
        }
        assertNothingLeft(sender, buffersBefore);
    }

    /** The sender's send buffers are back to {@code buffersBefore} and nothing is in flight. */
    private static void assertNothingLeft(Transport sender, long buffersBefore) throws InterruptedException {
        assertTrue(waitFor(() -> sendPoolBuffers(sender) == buffersBefore && sender.counters().bytesInFlight() == 0, 10_000),
                "send buffers or window left behind: " + sendPoolBuffers(sender) + " buffers, " + buffersBefore
                + " before; in flight " + sender.counters().bytesInFlight());
    }

    /** A handler that releases what arrives and keeps the cause of a peer's failure. */
    private static MessageHandler releasing(AtomicReference<Throwable> closed) {
        return new MessageHandler() {
            @Override
            public void onMessage(Peer from, dev.ferry.transport.InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                closed.set(cause);
            }
        };
    }


}
