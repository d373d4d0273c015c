package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * Sends nobody waits for ({@link Peer#sendWatched}, {@link Peer#sendAndForget}, {@link
 * Peer#trySend}) do not keep an idle shm progress thread waking in short slices to reap their
 * completions (its own completions do not ring its doorbell): it reaps them on its next turn of
 * work or timer, and in short slices only while a thread waits for a send (a future, the send
 * pool, the window). These tests check what must hold whatever it does: every message arrives
 * once, intact, in order; every watched send is reported exactly once, a failure with a reason;
 * a sender waiting for send buffers or for the window is served; nothing is left in flight.
 */
@Timeout(120)
class UnawaitedSendTest extends FabricTransportFixture {

    private static final int STREAMS = 2;
    private static final int MESSAGES = 1_500;
    /** Sends before the receiver starts closing under the sender, in the peer-failure cases. */
    private static final int CLOSE_AFTER = 5_000;

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void watchedSendsArriveIntactAndAreReportedOnce(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int eager = config.eagerThreshold();
        Receiver in = new Receiver(STREAMS);
        Transport receiver = open(config, in);
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendBuffers(sender);
        AtomicIntegerArray reports = new AtomicIntegerArray(STREAMS * MESSAGES);
        Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
        for (int seq = 0; seq < MESSAGES; seq++) {
            for (int stream = 0; stream < STREAMS; stream++) {
                // Mostly eager, some rendezvous (whose completion is the peer's release).
                int size = seq % 101 == 0 ? 2 * eager + seq : 8 + (seq * 31 + stream) % (eager - 8);
                OutboundMessage message = peer.allocate(size);
                fill(message.segment(), stream, seq);
                int index = stream * MESSAGES + seq;
                peer.sendWatched(stream, message, (v, e) -> {
                    reports.incrementAndGet(index);
                    if (e != null) {
                        failures.add(e);
                    }
                });
            }
        }
        assertTrue(waitFor(() -> in.received.get() == (long) STREAMS * MESSAGES, 30_000),
                "received " + in.received.get() + " of " + STREAMS * MESSAGES);
        in.assertIntact(MESSAGES);
        assertTrue(waitFor(() -> allReported(reports), 10_000), "a watched send was never reported");
        for (int i = 0; i < reports.length(); i++) {
            assertEquals(1, reports.get(i), "reports of send " + i);
        }
        assertTrue(failures.isEmpty(), "a send to a live peer failed: " + failures.peek());
        assertTrue(waitFor(() -> sendBuffers(sender) == buffersBefore && sender.counters().bytesInFlight() == 0, 10_000),
                "send buffers or window left behind: " + sendBuffers(sender) + " buffers, " + buffersBefore
                + " before; in flight " + sender.counters().bytesInFlight());
        assertEquals(0, ((FabricTransport) sender).window().awaitedSendsForTest(), "sends counted as awaited");
    }

    @Test
    void aSenderWaitingForSendBuffersIsServedBySendsNobodyAwaits() throws Exception {
        // About 30 buffers of 64 KiB beside the control frames': the sender waits for the pool
        // again and again, and only completions of unawaited sends give buffers back.
        TransportConfig config = TransportConfig.defaults("shm").withPools(2L << 20, 32L << 20, 32L << 20);
        int size = Math.min(64 << 10, config.eagerThreshold());
        Receiver in = new Receiver(1);
        Transport receiver = open(config, in);
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        int messages = 400;
        for (int seq = 0; seq < messages; seq++) {
            OutboundMessage message = peer.allocate(size); // waits for the pool; fails if nobody reaps
            fill(message.segment(), 0, seq);
            peer.sendAndForget(0, message);
        }
        assertTrue(waitFor(() -> in.received.get() == messages, 30_000), "received " + in.received.get() + " of " + messages);
        in.assertIntact(messages);
        assertTrue(waitFor(() -> sender.counters().bytesInFlight() == 0, 10_000), "bytes left in flight");
        assertEquals(0, ((FabricTransport) sender).window().awaitedSendsForTest(), "sends counted as awaited");
    }

    @Test
    void aSenderRefusedByTheWindowIsAdmittedOnceItDrains() throws Exception {
        TransportConfig defaults = TransportConfig.defaults("shm");
        int size = 16 << 10;
        // Four messages fill a link's window: trySend is refused until completions are reaped.
        TransportConfig config = defaults.withPools(32L << 20, 32L << 20, 32L << 20)
                .withFlowControl(defaults.eagerThreshold(), defaults.receiveBuffersPerLink(), 4L * (size + 64),
                        defaults.sendWindowBytesPerPeer(), defaults.sendWindowBytesPerProcess());
        Receiver in = new Receiver(1);
        Transport receiver = open(config, in);
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        int messages = 1_000;
        long refusals = 0;
        for (int seq = 0; seq < messages; seq++) {
            OutboundMessage message = peer.allocate(size);
            fill(message.segment(), 0, seq);
            while (!peer.trySend(0, message)) {
                refusals++;
                Thread.onSpinWait();
            }
        }
        assertTrue(waitFor(() -> in.received.get() == messages, 30_000), "received " + in.received.get() + " of " + messages);
        in.assertIntact(messages);
        assertTrue(refusals > 0, "the window never refused: the test did not test it");
        assertTrue(waitFor(() -> sender.counters().bytesInFlight() == 0, 10_000), "bytes left in flight");
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void watchedSendsToAPeerThatFailsAreReportedOnceWithAReason(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        Transport receiver = open(config, (from, m) -> m.release());
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendBuffers(sender);
        int most = 200_000;
        AtomicIntegerArray reports = new AtomicIntegerArray(most);
        AtomicInteger unreasoned = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        Closer closer = new Closer(receiver); // the link fails under the sender
        int submitted = 0;
        try {
            for (; submitted < most; submitted++) {
                if (submitted == CLOSE_AFTER) {
                    closer.closeNow();
                }
                OutboundMessage message = peer.allocate(64);
                fill(message.segment(), 0, submitted);
                int index = submitted;
                peer.sendWatched(0, message, (v, e) -> {
                    reports.incrementAndGet(index);
                    if (e != null) {
                        failed.incrementAndGet();
                        if (!(e instanceof TransportException te) || te.reason() == TransportException.Reason.UNSPECIFIED) {
                            unreasoned.incrementAndGet();
                        }
                    }
                });
            }
        } catch (TransportException e) {
            assertTrue(e.reason() != TransportException.Reason.UNSPECIFIED, "a send failed without a reason: " + e);
        }
        closer.thread.join();
        int n = submitted;
        assertTrue(n < most, "the sender never saw the peer fail");
        assertTrue(waitFor(() -> {
            for (int i = 0; i < n; i++) {
                if (reports.get(i) == 0) {
                    return false;
                }
            }
            return true;
        }, 10_000), "a watched send to a failed peer was never reported");
        for (int i = 0; i < n; i++) {
            assertEquals(1, reports.get(i), "reports of send " + i);
        }
        assertEquals(0, unreasoned.get(), "failures without a reason");
        assertTrue(waitFor(() -> sendBuffers(sender) == buffersBefore, 10_000),
                "send buffers left behind: " + sendBuffers(sender) + ", " + buffersBefore + " before");
    }

    /**
     * shm eight times: a send that shm still held when the peer (in this process) closed was
     * never completed by the provider, and its future never settled, in 1-5 runs of 40 until the
     * teardown failed such sends itself ({@code OperationTable.ORPHANED_SEND}).
     */
    @ParameterizedTest
    @ValueSource(strings = {"shm", "shm", "shm", "shm", "shm", "shm", "shm", "shm", "tcp"})
    void awaitedSendsToAPeerThatFailsAllSettleAndNoneStaysCounted(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        Transport receiver = open(config, (from, m) -> m.release());
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        SendWindow window = ((FabricTransport) sender).window();
        java.util.List<java.util.concurrent.CompletableFuture<Void>> futures = new java.util.ArrayList<>();
        int most = 200_000;
        Closer closer = new Closer(receiver); // the link fails under the sender
        boolean sawCount = false;
        try {
            for (int seq = 0; seq < most; seq++) {
                if (seq == CLOSE_AFTER) {
                    closer.closeNow();
                }
                OutboundMessage message = peer.allocate(64 + seq % 4096);
                fill(message.segment(), 0, seq);
                futures.add(peer.send(seq % STREAMS, message));
                sawCount |= window.awaitedSendsForTest() > 0;
            }
        } catch (TransportException e) {
            assertTrue(e.reason() != TransportException.Reason.UNSPECIFIED, "a send failed without a reason: " + e);
        }
        closer.thread.join();
        assertTrue(futures.size() < most, "the sender never saw the peer fail");
        assertTrue(sawCount, "no send was ever counted as awaited");
        for (java.util.concurrent.CompletableFuture<Void> future : futures) {
            try {
                future.get(10, java.util.concurrent.TimeUnit.SECONDS);
            } catch (java.util.concurrent.TimeoutException e) {
                throw new AssertionError("send " + futures.indexOf(future) + " of " + futures.size() + " never settled ("
                        + futures.stream().filter(f -> !f.isDone()).count() + " not settled): " + sender.counters(), e);
            } catch (java.util.concurrent.ExecutionException e) {
                assertTrue(e.getCause() instanceof TransportException te
                        && te.reason() != TransportException.Reason.UNSPECIFIED, "a send failed without a reason: " + e.getCause());
            }
        }
        assertTrue(waitFor(() -> window.awaitedSendsForTest() == 0, 10_000),
                "sends still counted as awaited after every future settled: " + window.awaitedSendsForTest());
    }

    @Test
    void aFailingOutcomeHandlerStopsNothing() throws Exception {
        TransportConfig config = TransportConfig.defaults("shm").withPools(32L << 20, 32L << 20, 32L << 20);
        Receiver in = new Receiver(1);
        Transport receiver = open(config, in);
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        int messages = 200;
        AtomicInteger reports = new AtomicInteger();
        for (int seq = 0; seq < messages; seq++) {
            OutboundMessage message = peer.allocate(256);
            fill(message.segment(), 0, seq);
            peer.sendWatched(0, message, (v, e) -> {
                reports.incrementAndGet();
                throw new IllegalStateException("a handler that fails");
            });
        }
        assertTrue(waitFor(() -> in.received.get() == messages && reports.get() == messages, 30_000),
                "received " + in.received.get() + ", reported " + reports.get() + " of " + messages);
        in.assertIntact(messages);
        assertTrue(peer.isOpen() && sender.counters().linkFailures() == 0, "the handler's failure failed the peer");
    }

    /** Checks each message's bytes and its order in its stream. */
    private static final class Receiver implements MessageHandler {

        final AtomicLong received = new AtomicLong();
        final AtomicLongArray next;
        final Queue<String> problems = new ConcurrentLinkedQueue<>();

        Receiver(int streams) {
            next = new AtomicLongArray(streams);
        }

        @Override
        public void onMessage(Peer from, dev.ferry.transport.InboundMessage m) {
            int stream = m.stream();
            MemorySegment body = m.segment();
            long seq = body.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(body, stream, seq);
            if (bad != null) {
                problems.add(bad);
            } else if (next.getAndIncrement(stream) != seq) {
                problems.add("stream " + stream + ": message " + seq + " out of order or twice");
            }
            m.release();
            received.incrementAndGet();
        }

        void assertIntact(int perStream) {
            assertTrue(problems.isEmpty(), problems.size() + " problems, first: " + problems.peek());
            for (int s = 0; s < next.length(); s++) {
                assertEquals(perStream, next.get(s), "stream " + s);
            }
        }
    }

    private static boolean allReported(AtomicIntegerArray reports) {
        for (int i = 0; i < reports.length(); i++) {
            if (reports.get(i) == 0) {
                return false;
            }
        }
        return true;
    }

    private static long sendBuffers(Transport transport) {
        return transport.allocatorStats().orElseThrow().pool(PoolKind.SEND).buffersInUse();
    }
}
