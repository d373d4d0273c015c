package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Frames are pooled (outbound per peer, inbound per receive buffer), yet a message the
 * application kept after sending or releasing it throws instead of reaching the frame's next
 * message: before and after the frame is reused.
 */
class StaleMessageTest extends FabricTransportFixture {

    private static final TransportConfig CONFIG = TransportConfig.defaults("shm").withPools(16L << 20, 16L << 20, 16L << 20);

    @Test
    void aSentOrReleasedOutboundMessageStaysUnusable() throws Exception {
        LinkedBlockingQueue<Long> received = new LinkedBlockingQueue<>();
        Transport receiver = open(CONFIG, (from, message) -> {
            received.add(message.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            message.release();
        });
        Peer peer = open(CONFIG, (from, message) -> message.release()).connect(receiver.localAddress());

        OutboundMessage sent = peer.allocate(8);
        sent.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 1);
        peer.send(0, sent).get(5, TimeUnit.SECONDS);
        OutboundMessage released = peer.allocate(8);
        released.release();
        assertStale(peer, sent, "message was sent; the transport releases it");
        assertStale(peer, released, "message released twice");

        // Reuse every pooled frame several times over, then try the stale handles again.
        for (long i = 2; i < 2_000; i++) {
            OutboundMessage m = peer.allocate(8);
            m.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, i);
            switch ((int) (i % 3)) {
                case 0 -> {
                    while (!peer.trySend(0, m)) {
                        Thread.onSpinWait();
                    }
                }
                case 1 -> peer.send(0, m);
                default -> peer.sendAndForget(0, m);
            }
        }
        OutboundMessage live = peer.allocate(8);
        assertStale(peer, sent, "message was sent; the transport releases it");
        assertStale(peer, released, "message released twice");
        live.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 2_000);
        peer.send(0, live).get(5, TimeUnit.SECONDS);
        for (long i = 1; i <= 2_000; i++) {
            assertEquals(i, received.poll(5, TimeUnit.SECONDS), "message " + i);
        }
    }

    @Test
    void aMessageSentToAnotherPeerThanItsOwnIsRefusedAndStaysTheCallers() throws Exception {
        LinkedBlockingQueue<Long> received = new LinkedBlockingQueue<>();
        Transport one = open(CONFIG, (from, message) -> {
            received.add(message.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            message.release();
        });
        Transport other = open(CONFIG, (from, message) -> message.release());
        Transport sender = open(CONFIG, (from, message) -> message.release());
        Peer toOne = sender.connect(one.localAddress());
        Peer toOther = sender.connect(other.localAddress());

        OutboundMessage message = toOne.allocate(8);
        message.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 7);
        assertThrows(dev.ferry.transport.TransportException.class, () -> toOther.trySend(0, message));
        assertThrows(dev.ferry.transport.TransportException.class, () -> toOther.send(0, message));
        assertEquals(0, sender.counters().bytesInFlight(), "a refused message took no window");
        // Still the caller's: it goes to its own peer.
        toOne.send(0, message).get(5, TimeUnit.SECONDS);
        assertEquals(7L, received.poll(5, TimeUnit.SECONDS));
    }

    private static void assertStale(Peer peer, OutboundMessage message, String onRelease) {
        assertThrows(IllegalStateException.class, message::segment);
        assertThrows(IllegalStateException.class, () -> message.truncate(0));
        assertThrows(IllegalStateException.class, () -> peer.send(0, message));
        assertThrows(IllegalStateException.class, () -> peer.trySend(0, message));
        assertThrows(IllegalStateException.class, () -> peer.sendAndForget(0, message));
        assertEquals(onRelease, assertThrows(IllegalStateException.class, message::release).getMessage());
    }

    @Test
    void aReleasedInboundMessageStaysUnusableWhenItsBufferBringsTheNext() throws Exception {
        LinkedBlockingQueue<InboundMessage> kept = new LinkedBlockingQueue<>();
        Transport receiver = open(CONFIG, (from, message) -> kept.add(message));
        Peer peer = open(CONFIG, (from, message) -> message.release()).connect(receiver.localAddress());

        send(peer, 7, 42);
        InboundMessage first = kept.poll(5, TimeUnit.SECONDS);
        assertEquals(42, first.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        first.release();
        assertThrows(IllegalStateException.class, first::segment);
        assertThrows(IllegalStateException.class, first::release);
        assertEquals(7, first.stream());

        // Every receive buffer, the first one's included, brings further messages.
        for (long i = 0; i < 2_000; i++) {
            send(peer, 3, i);
            InboundMessage next = kept.poll(5, TimeUnit.SECONDS);
            assertEquals(i, next.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
            assertEquals(3, next.stream());
            next.release();
            assertThrows(IllegalStateException.class, first::segment);
        }
        assertThrows(IllegalStateException.class, first::release);
        assertEquals(7, first.stream());
        assertTrue(waitFor(() -> receiver.counters().receiveBuffersHeld() == 0, 5_000));
    }

    private static void send(Peer peer, int stream, long value) throws Exception {
        OutboundMessage m = peer.allocate(8);
        m.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, value);
        peer.send(stream, m).get(5, TimeUnit.SECONDS);
    }
}
