package dev.ferry.transport.admission;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The admission of unauthenticated connections: the bounds drop the oldest of a flooding source
 * and spare every other source, and a deadline given an event loop fires in a turn of that loop.
 */
@Timeout(30)
class HandshakeGateTest {

    private static final System.Logger LOG = System.getLogger(HandshakeGateTest.class.getName());

    private final List<String> closed = new CopyOnWriteArrayList<>();
    private final ScheduledThreadPoolExecutor loop = new ScheduledThreadPoolExecutor(1,
            r -> Thread.ofPlatform().daemon().name("test-loop").unstarted(r));

    @AfterEach
    void stop() {
        loop.shutdownNow();
    }

    private HandshakeGate.Ticket admit(HandshakeGate gate, String source, String name) throws Exception {
        return gate.admit(InetAddress.getByName(source), name, () -> closed.add(name));
    }

    @Test
    void aFloodFromOneSourceEvictsOnlyItsOwnOldest() throws Exception {
        DropLog log = new DropLog(LOG, "test port");
        HandshakeGate gate = new HandshakeGate(log, 60_000, 4, 1_000, 0, 0);
        HandshakeGate.Ticket other = admit(gate, "127.0.0.2", "other");
        List<HandshakeGate.Ticket> flood = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            flood.add(admit(gate, "127.0.0.1", "flood-" + i));
        }
        // Four pending from the flooding source at most: the six oldest went, in order.
        assertEquals(List.of("flood-0", "flood-1", "flood-2", "flood-3", "flood-4", "flood-5"), closed);
        assertEquals(6, gate.evicted());
        assertEquals(5, gate.pending());
        assertEquals(6, log.dropped());
        // A good client behind the flood, from the same source, still gets in; so does the other source.
        HandshakeGate.Ticket good = admit(gate, "127.0.0.1", "good");
        assertEquals("flood-6", closed.get(closed.size() - 1));
        assertTrue(good.authenticated());
        assertTrue(other.authenticated());
        assertFalse(flood.get(6).authenticated(), "an evicted handshake must not authenticate");
        assertTrue(flood.get(9).authenticated());
        good.finished();
        other.finished();
        assertEquals(7, closed.size(), closed.toString());
        assertEquals(2, gate.pending());
    }

    @Test
    void theBoundInAllDropsTheOldestOfAnySource() throws Exception {
        HandshakeGate gate = new HandshakeGate(new DropLog(LOG, "test port"), 60_000, 100, 3, 0, 0);
        admit(gate, "127.0.0.1", "a");
        admit(gate, "127.0.0.2", "b");
        admit(gate, "127.0.0.3", "c");
        HandshakeGate.Ticket d = admit(gate, "127.0.0.4", "d");
        assertEquals(List.of("a"), closed);
        assertEquals(3, gate.pending());
        assertTrue(d.authenticated());
    }

    @Test
    void silentConnectionsAreClosedAtTheDeadlineOnTheGivenLoop() throws Exception {
        HandshakeGate gate = new HandshakeGate(new DropLog(LOG, "test port"), 100, 0, 0);
        List<String> threads = new CopyOnWriteArrayList<>();
        CountDownLatch closedOnce = new CountDownLatch(1);
        HandshakeGate.Ticket silent = gate.admit(InetAddress.getLoopbackAddress(), "silent", () -> {
            threads.add(Thread.currentThread().getName());
            closedOnce.countDown();
        }, loop);
        HandshakeGate.Ticket quick = gate.admit(InetAddress.getLoopbackAddress(), "quick", () -> closed.add("quick"), loop);
        assertTrue(quick.authenticated());
        quick.finished();
        assertTrue(closedOnce.await(10, TimeUnit.SECONDS), "the silent connection was never closed");
        assertEquals(List.of("test-loop"), threads);
        assertEquals(1, gate.expired());
        assertFalse(silent.alive());
        assertFalse(silent.authenticated());
        Thread.sleep(200);
        assertEquals(List.of(), closed, "a connection that authenticated in time was closed");
        assertEquals(0, gate.pending());
    }

    /**
     * A loop busy past the deadline (a long turn of reads) that finds the proof in its turn
     * admits it: the deadline waits for the loop's next turn. On the shared timer the same
     * connection is closed while its proof waits to be read.
     */
    @Test
    void aProofReadInTheTurnThatPassedTheDeadlineIsAdmitted() throws Exception {
        HandshakeGate gate = new HandshakeGate(new DropLog(LOG, "test port"), 50, 0, 0);
        List<HandshakeGate.Ticket> tickets = new CopyOnWriteArrayList<>();
        List<Boolean> admitted = new CopyOnWriteArrayList<>();
        loop.submit(() -> {
            // Admitted in the loop's turn, as a channel's handshake is: the loop's own deadline
            // can fire only after this turn, however late the loop thread was scheduled.
            HandshakeGate.Ticket onLoop = gate.admit(InetAddress.getLoopbackAddress(), "on-loop", () -> closed.add("on-loop"), loop);
            HandshakeGate.Ticket onTimer = gate.admit(InetAddress.getLoopbackAddress(), "on-timer", () -> closed.add("on-timer"));
            tickets.add(onLoop);
            long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300);
            while (System.nanoTime() < until) {
                Thread.onSpinWait(); // the turn's reads of other links
            }
            admitted.add(onTimer.authenticated());
            admitted.add(onLoop.authenticated());
        }).get(10, TimeUnit.SECONDS);
        assertEquals(List.of(false, true), admitted);
        assertEquals(List.of("on-timer"), closed);
        tickets.getFirst().finished();
        assertEquals(0, gate.pending());
    }
}
