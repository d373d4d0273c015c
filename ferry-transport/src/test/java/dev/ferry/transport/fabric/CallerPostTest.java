package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * Application threads post their own sends and poll for completions ({@link CallerProgress})
 * while the progress thread runs: every message arrives once, intact, in order per stream; no
 * buffer is left behind; credits come back; and a send made while the link fails or the
 * transport closes fails with a reason, its buffer freed.
 */
@Timeout(120)
class CallerPostTest extends FabricTransportFixture {

    private static final int THREADS = 4;
    private static final int MESSAGES = 1_500;

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void manyCallersPostDirectlyWhileTheProgressThreadRuns(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int eager = config.eagerThreshold();
        AtomicLongArray next = new AtomicLongArray(THREADS);
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        AtomicLong received = new AtomicLong();
        Transport receiver = open(config, (from, m) -> {
            int stream = m.stream();
            MemorySegment body = m.segment();
            long seq = body.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(body, stream, seq);
            if (bad != null) {
                problems.add(bad);
            } else if (next.getAndIncrement(stream) != seq) {
                problems.add("stream " + stream + ": message " + seq + " out of order or twice, expected "
                        + next.get(stream));
            }
            m.release();
            received.incrementAndGet();
        });
        // Whatever the load of the host: its progress threads spin when idle and callers poll.
        Transport sender = spinning(() -> open(config, (from, m) -> m.release()));
        FabricTransport fabric = (FabricTransport) sender;
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendBuffers(sender);

        CountDownLatch start = new CountDownLatch(1);
        Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int stream = t;
            threads.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                try {
                    start.await();
                    for (int seq = 0; seq < MESSAGES; seq++) {
                        // Mostly eager, some rendezvous: both go out from the calling thread.
                        int size = seq % 97 == 0 ? 2 * eager + seq : 8 + (seq * 31 + stream) % (eager - 8);
                        OutboundMessage message = peer.allocate(size);
                        fill(message.segment(), stream, seq);
                        CompletableFuture<Void> sent = peer.send(stream, message);
                        if (seq % 3 == 0) {
                            sender.awaitPolling(sent, 50_000); // polls for its own completion
                        }
                        if (seq % 64 == 0) {
                            sent.get(30, TimeUnit.SECONDS);
                        }
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        start.countDown();
        for (Thread t : threads) {
            t.join();
        }
        if (!errors.isEmpty()) {
            throw new AssertionError("a caller failed", errors.peek());
        }
        assertTrue(waitFor(() -> received.get() == (long) THREADS * MESSAGES, 30_000),
                "received " + received.get() + " of " + THREADS * MESSAGES);
        assertTrue(problems.isEmpty(), problems.size() + " problems, first: " + problems.peek());
        for (int t = 0; t < THREADS; t++) {
            assertEquals(MESSAGES, next.get(t), "stream " + t);
        }
        long[] counts = fabric.callerCounts();
        assertTrue(counts[0] > 0, "no caller ever posted its own send");
        assertTrue(counts[1] > 0, "no caller ever polled");
        assertTrue(waitFor(() -> sendBuffers(sender) == buffersBefore && sender.counters().bytesInFlight() == 0, 10_000),
                "send buffers or window left behind: " + sendBuffers(sender) + " buffers, " + buffersBefore
                + " before; in flight " + sender.counters().bytesInFlight());
        assertEquals(0, receiver.counters().receiveBuffersHeld());
        assertEquals((long) THREADS * MESSAGES, sender.counters().messagesSent());
        // Credits conserved: what the receiver thinks the sender holds is what the sender holds.
        assertTrue(waitFor(() -> sum(receiver, "peerHeld") == sum(sender, "available"), 10_000),
                "credits not conserved:\nsender " + fabric.describeLinks() + "\nreceiver "
                + ((FabricTransport) receiver).describeLinks());
    }

    /**
     * A thread whose sends wait in the hand-over queue (another thread held the token) and that
     * then gets the token posts its next sends behind them, never before: each round queues more
     * hand-overs than the progress thread takes in a turn, then the same thread sends on at once.
     */
    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aSendPostedDirectlyGoesBehindTheSameThreadsHandOvers(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int rounds = 150; // at most: at least 20, then until the caller has posted a send itself
        int queued = 600; // more than a turn's drain of hand-overs
        int after = 200;
        AtomicLong next = new AtomicLong();
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        Transport receiver = open(config, (from, m) -> {
            long seq = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(m.segment(), 0, seq);
            long expected = next.getAndIncrement();
            if (bad != null) {
                problems.add(bad);
            } else if (seq != expected) {
                problems.add("message " + seq + " arrived as number " + expected);
            }
            m.release();
        });
        Transport sender = spinning(() -> open(config, (from, m) -> m.release()));
        FabricTransport fabric = (FabricTransport) sender;
        FabricToken token = fabric.loop.token();
        Peer peer = sender.connect(receiver.localAddress());
        long before = fabric.callerCounts()[0];
        AtomicLong seq = new AtomicLong();
        int played = 0;
        for (; played < rounds && (played < 20 || fabric.callerCounts()[0] == before); played++) {
            callerRound(fabric, token, () -> {
                for (int i = 0; i < queued; i++) {
                    send(peer, seq.getAndIncrement()); // the token is taken: handed over
                }
            }, () -> {
                for (int i = 0; i < after; i++) {
                    send(peer, seq.getAndIncrement()); // the token may be free: posted here
                }
            });
        }
        long total = seq.get();
        assertTrue(waitFor(() -> next.get() == total, 30_000), "received " + next.get() + " of " + total);
        assertTrue(problems.isEmpty(), problems.size() + " out of order or damaged, first: " + problems.peek());
        assertTrue(fabric.callerCounts()[0] > before, "in " + played + " rounds the caller never posted a send itself");
    }

    /**
     * Application code that a caller runs while it drains the hand-over queue (here a failed
     * send's callback, failed by a peer's teardown queued before the caller's sends) sends behind
     * the caller's earlier hand-overs and before the send during which it ran, as in the caller's
     * own order; run by the progress thread it may go anywhere.
     */
    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aSendFromACallbackTheCallerRunsKeepsTheCallersOrder(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        int rounds = 150; // at most: it stops once the caller ran the callback in five
        int queued = 300;
        int after = 200;
        long marker = 1L << 40; // callbacks' messages: marker + round
        AtomicLong next = new AtomicLong();
        long[] lastBefore = new long[rounds];
        java.util.Arrays.fill(lastBefore, Long.MIN_VALUE);
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        Transport receiver = open(config, (from, m) -> {
            long seq = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(m.segment(), 0, seq);
            if (bad != null) {
                problems.add(bad);
            } else if (seq >= marker) {
                synchronized (lastBefore) {
                    lastBefore[(int) (seq - marker)] = next.get() - 1;
                    lastBefore.notifyAll();
                }
            } else if (seq != next.getAndIncrement()) {
                problems.add("message " + seq + " arrived as number " + (next.get() - 1));
            }
            m.release();
        });
        Transport doomed = open(config, (from, m) -> m.release());
        Transport sender = spinning(() -> open(config, (from, m) -> m.release()));
        FabricTransport fabric = (FabricTransport) sender;
        FabricToken token = fabric.loop.token();
        Peer peer = sender.connect(receiver.localAddress());
        long[] ranOnCaller = new long[rounds]; // the caller's next send when it ran the callback, or -1
        java.util.Arrays.fill(ranOnCaller, -1);
        AtomicLong seq = new AtomicLong();
        AtomicLong current = new AtomicLong();
        int played = 0;
        for (int onCallerSoFar = 0; played < rounds && onCallerSoFar < 5; played++) {
            int r = played;
            Peer gone = sender.connect(doomed.localAddress());
            callerRound(fabric, token, () -> {
                Thread me = Thread.currentThread();
                current.set(seq.get()); // the callback may run at once, on this thread
                OutboundMessage lost = gone.allocate(64);
                fill(lost.segment(), 0, 0);
                gone.send(0, lost).whenComplete((v, e) -> {
                    if (Thread.currentThread() == me) {
                        ranOnCaller[r] = current.get();
                    }
                    send(peer, marker + r);
                });
                gone.close(); // its teardown fails the send above, queued before what follows
                for (int i = 0; i < queued; i++) {
                    current.set(seq.get());
                    send(peer, seq.getAndIncrement());
                }
            }, () -> {
                for (int i = 0; i < after; i++) {
                    current.set(seq.get());
                    send(peer, seq.getAndIncrement());
                }
            });
            synchronized (lastBefore) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (lastBefore[r] == Long.MIN_VALUE && System.nanoTime() < deadline) {
                    lastBefore.wait(100);
                }
            }
            assertTrue(lastBefore[r] != Long.MIN_VALUE, "round " + r + ": the callback's message never arrived");
            if (ranOnCaller[r] >= 0) {
                onCallerSoFar++;
            }
        }
        long total = seq.get();
        assertTrue(waitFor(() -> next.get() == total, 30_000), "received " + next.get() + " of " + total);
        assertTrue(problems.isEmpty(), problems.size() + " out of order or damaged, first: " + problems.peek());
        int onCaller = 0;
        for (int r = 0; r < played; r++) {
            if (ranOnCaller[r] >= 0) {
                onCaller++;
                assertEquals(ranOnCaller[r] - 1, lastBefore[r], "round " + r + ": the caller ran the callback before its send "
                        + ranOnCaller[r] + ", its message arrived after " + lastBefore[r]);
            }
        }
        System.out.println(provider + ": the caller ran the callback in " + onCaller + " rounds of " + played);
        assertTrue(onCaller > 0, "in " + played + " rounds the caller never ran the callback: the case was not tested");
    }

    /** A caller's part of a round, which may throw. */
    private interface CallerPart {
        void run() throws Exception;
    }

    /**
     * One round on a thread of its own: {@code handOver} once this thread holds the token (its
     * sends are handed over), then {@code sendOn} at once after this thread gives it back.
     */
    private static void callerRound(FabricTransport fabric, FabricToken token, CallerPart handOver, CallerPart sendOn)
            throws Exception {
        CountDownLatch tokenTaken = new CountDownLatch(1);
        CountDownLatch handedOver = new CountDownLatch(1);
        CountDownLatch tokenFree = new CountDownLatch(1);
        Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
        Thread caller = Thread.ofPlatform().name("caller").start(() -> {
            try {
                tokenTaken.await();
                handOver.run();
                handedOver.countDown();
                tokenFree.await();
                sendOn.run();
            } catch (Throwable e) {
                errors.add(e);
                handedOver.countDown();
            }
        });
        take(fabric, token);
        tokenTaken.countDown();
        try {
            assertTrue(handedOver.await(30, TimeUnit.SECONDS), "the caller did not hand its sends over");
        } finally {
            token.release();
            tokenFree.countDown();
        }
        caller.join();
        if (!errors.isEmpty()) {
            throw new AssertionError("the caller failed", errors.peek());
        }
    }

    /**
     * Takes the token from the progress thread, which lends it while it spins after work: each
     * attempt hands it an empty task to wake it from a sleep that holds the token.
     */
    private static void take(FabricTransport fabric, FabricToken token) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            fabric.proxy.run(() -> { });
            for (int spin = 0; spin < 10_000; spin++) {
                if (token.tryAcquire()) {
                    return;
                }
                Thread.onSpinWait();
            }
            Thread.sleep(1);
        }
        fail("the progress thread never lent the token");
    }

    private static void send(Peer peer, long seq) {
        OutboundMessage message = peer.allocate(64);
        fill(message.segment(), 0, seq);
        peer.sendAndForget(0, message);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void callersPostingWhileTheLinkFailsGetAReasonAndLeakNothing(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        Transport receiver = open(config, (from, m) -> m.release());
        Transport sender = spinning(() -> open(config, (from, m) -> m.release()));
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendBuffers(sender);
        Queue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        Queue<CompletableFuture<Void>> futures = new ConcurrentLinkedQueue<>();
        AtomicInteger reasons = new AtomicInteger();
        CountDownLatch running = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int stream = t;
            threads.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                running.countDown();
                for (int seq = 0; ; seq++) {
                    try {
                        OutboundMessage message = peer.allocate(64);
                        fill(message.segment(), stream, seq);
                        CompletableFuture<Void> sent = peer.send(stream, message);
                        futures.add(sent);
                        sender.awaitPolling(sent, 20_000);
                    } catch (TransportException e) {
                        reasons.incrementAndGet();
                        if (e.reason() == TransportException.Reason.UNSPECIFIED) {
                            unexpected.add(e);
                        }
                        return; // the peer failed: this caller stops
                    } catch (Throwable e) {
                        unexpected.add(e);
                        return;
                    }
                }
            }));
        }
        running.await();
        Thread.sleep(100);
        receiver.close(); // the link fails under the callers
        for (Thread t : threads) {
            t.join(30_000);
            assertTrue(!t.isAlive(), t.getName() + " still sends to a failed peer");
        }
        if (!unexpected.isEmpty()) {
            throw new AssertionError("a caller saw something other than a reasoned TransportException", unexpected.peek());
        }
        assertEquals(THREADS, reasons.get(), "each caller stops on a TransportException");
        for (CompletableFuture<Void> f : futures) {
            try {
                f.get(10, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof TransportException te) || te.reason() == TransportException.Reason.UNSPECIFIED) {
                    fail("a send failed without a reason: " + e.getCause());
                }
            }
        }
        assertTrue(waitFor(() -> sendBuffers(sender) == buffersBefore, 10_000),
                "send buffers left behind: " + sendBuffers(sender) + ", " + buffersBefore + " before (control frames)");
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void callersPostingWhileTheTransportClosesGetAReason(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 32L << 20);
        Transport receiver = open(config, (from, m) -> m.release());
        Transport sender = spinning(() -> open(config, (from, m) -> m.release()));
        Peer peer = sender.connect(receiver.localAddress());
        Queue<Throwable> unexpected = new ConcurrentLinkedQueue<>();
        Queue<CompletableFuture<Void>> futures = new ConcurrentLinkedQueue<>();
        CountDownLatch running = new CountDownLatch(THREADS);
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int stream = t;
            threads.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                running.countDown();
                for (int seq = 0; ; seq++) {
                    try {
                        OutboundMessage message = peer.allocate(64);
                        try {
                            fill(message.segment(), stream, seq);
                        } catch (IllegalStateException e) {
                            // The close freed the message's memory while this thread wrote into
                            // it (OutboundMessage#segment): allowed only once closed, and the
                            // next call must then give the reason.
                            if (!((FabricTransport) sender).isClosed()) {
                                unexpected.add(e);
                                return;
                            }
                            continue;
                        }
                        CompletableFuture<Void> sent = peer.send(stream, message);
                        futures.add(sent);
                        sender.awaitPolling(sent, 20_000);
                    } catch (TransportException e) {
                        if (e.reason() == TransportException.Reason.UNSPECIFIED) {
                            unexpected.add(e);
                        }
                        return;
                    } catch (Throwable e) {
                        unexpected.add(e);
                        return;
                    }
                }
            }));
        }
        running.await();
        Thread.sleep(100);
        sender.close(); // the transport closes under its own callers
        for (Thread t : threads) {
            t.join(30_000);
            assertTrue(!t.isAlive(), t.getName() + " still sends on a closed transport");
        }
        if (!unexpected.isEmpty()) {
            throw new AssertionError("a caller saw something other than a reasoned TransportException", unexpected.peek());
        }
        for (CompletableFuture<Void> f : futures) {
            try {
                f.get(10, TimeUnit.SECONDS);
            } catch (java.util.concurrent.ExecutionException e) {
                if (!(e.getCause() instanceof TransportException te) || te.reason() == TransportException.Reason.UNSPECIFIED) {
                    fail("a send failed without a reason: " + e.getCause());
                }
            }
        }
    }

    /** Send buffers in use: the transport's own control-frame buffers, and any message not yet done. */
    private static long sendBuffers(Transport transport) {
        return transport.allocatorStats().orElseThrow().pool(PoolKind.SEND).buffersInUse();
    }

    /** The sum of {@code field} over the transport's links, read on its progress thread. */
    private static long sum(Transport transport, String field) {
        long total = 0;
        java.util.regex.Matcher m = java.util.regex.Pattern.compile(" " + field + "=(-?\\d+)")
                .matcher(((FabricTransport) transport).describeLinks());
        while (m.find()) {
            total += Long.parseLong(m.group(1));
        }
        return total;
    }
}
