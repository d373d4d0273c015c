package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReferenceArray;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Callers that wait for their replies asleep on the shm doorbell ({@link DoorbellWatch}, through
 * {@link Transport#awaitBlocking}): each gets its own replies, exactly once, intact and in order,
 * with more callers than wake bits; a caller whose reply never comes times out on time while
 * the others go on; callers asleep when the peer fails or the transport closes all return, and
 * a new peer is served after a failure (no wake-up lost, no word left disarmed).
 */
@Timeout(120)
class DoorbellWatchTest extends FabricTransportFixture {

    private static final int ROUNDS = 400;

    /** An echo server: each request goes back on its stream, byte for byte. */
    private Transport echo(TransportConfig config) {
        return open(config, (from, m) -> {
            MemorySegment body = m.segment();
            OutboundMessage reply = from.allocate((int) body.byteSize());
            MemorySegment.copy(body, 0, reply.segment(), 0, body.byteSize());
            int stream = m.stream();
            m.release();
            from.sendWatched(stream, reply, (v, e) -> { });
        });
    }

    /** Replies: checked against what {@link #fill} wrote, in order per stream; the caller's future completed with the number. */
    private static MessageHandler replies(AtomicReferenceArray<CompletableFuture<Long>> waiting, AtomicLongArray next,
            Queue<String> problems) {
        return (from, m) -> {
            int stream = m.stream();
            long seq = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String bad = check(m.segment(), stream, seq);
            if (bad != null) {
                problems.add(bad);
            } else if (next.getAndIncrement(stream) != seq) {
                problems.add("stream " + stream + ": reply " + seq + " out of order or twice");
            }
            m.release();
            CompletableFuture<Long> f = waiting.get(stream);
            if (f != null) {
                f.complete(seq);
            }
        };
    }

    private static int size(int stream, int seq) {
        return seq % 53 == 0 ? 60_000 + seq : 8 + (seq * 31 + stream * 17) % 4_000;
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm:8", "shm:40", "tcp:8"})
    void manyCallersWaitingAsleepEachGetTheirOwnRepliesExactlyOnce(String spec) throws Exception {
        String provider = spec.substring(0, spec.indexOf(':'));
        int threads = Integer.parseInt(spec.substring(spec.indexOf(':') + 1));
        TransportConfig config = TransportConfig.defaults(provider).withPools(64L << 20, 64L << 20, 32L << 20);
        Transport server = echo(config);
        AtomicReferenceArray<CompletableFuture<Long>> waiting = new AtomicReferenceArray<>(threads);
        AtomicLongArray next = new AtomicLongArray(threads);
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        Transport client = open(config, replies(waiting, next, problems));
        Peer peer = client.connect(server.localAddress());
        Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> callers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int stream = t;
            callers.add(Thread.ofPlatform().name("caller-" + t).start(() -> {
                try {
                    start.await();
                    for (int seq = 0; seq < ROUNDS; seq++) {
                        CompletableFuture<Long> reply = new CompletableFuture<>();
                        waiting.set(stream, reply);
                        OutboundMessage request = peer.allocate(size(stream, seq));
                        fill(request.segment(), stream, seq);
                        peer.sendWatched(stream, request, (v, e) -> {
                            if (e != null) {
                                errors.add(e);
                            }
                        });
                        if (!client.awaitBlocking(reply, TimeUnit.SECONDS.toNanos(20))) {
                            reply.get(20, TimeUnit.SECONDS); // no doorbell, or no wake bit free
                        }
                        assertEquals(seq, reply.getNow(-1L), "caller " + stream + " got another reply");
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        start.countDown();
        for (Thread c : callers) {
            c.join(60_000);
            assertFalse(c.isAlive(), c.getName() + " hangs");
        }
        if (!errors.isEmpty()) {
            throw new AssertionError(errors.size() + " caller errors", errors.peek());
        }
        assertTrue(problems.isEmpty(), problems.size() + " problems, first: " + problems.peek());
        for (int t = 0; t < threads; t++) {
            assertEquals(ROUNDS, next.get(t), "replies of caller " + t);
        }
        long[] watch = ((FabricTransport) client).callers.watchCounts();
        if (provider.equals("shm")) {
            assertTrue(watch[0] > 0, "no caller ever slept on the doorbell");
        } else {
            assertEquals(0, watch[0], "tcp has no doorbell: callers wait on their futures");
        }
        assertTrue(waitFor(() -> client.counters().receiveBuffersHeld() == 0 && client.counters().bytesInFlight() == 0,
                10_000), "buffers or window left behind");
    }

    @Test
    void aCallerWhoseReplyNeverComesTimesOutWhileTheOthersGetTheirs() throws Exception {
        TransportConfig config = TransportConfig.defaults("shm").withPools(64L << 20, 64L << 20, 32L << 20);
        Transport server = echo(config);
        int threads = 4;
        AtomicReferenceArray<CompletableFuture<Long>> waiting = new AtomicReferenceArray<>(threads);
        AtomicLongArray next = new AtomicLongArray(threads);
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        Transport client = open(config, replies(waiting, next, problems));
        Peer peer = client.connect(server.localAddress());
        Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
        List<Thread> callers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int stream = t;
            callers.add(Thread.ofPlatform().start(() -> {
                try {
                    for (int seq = 0; seq < ROUNDS; seq++) {
                        CompletableFuture<Long> reply = new CompletableFuture<>();
                        waiting.set(stream, reply);
                        OutboundMessage request = peer.allocate(size(stream, seq));
                        fill(request.segment(), stream, seq);
                        peer.sendWatched(stream, request, (v, e) -> { });
                        assertTrue(client.awaitBlocking(reply, TimeUnit.SECONDS.toNanos(20)), "reply " + seq);
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        for (int i = 0; i < 5; i++) {
            CompletableFuture<Void> never = new CompletableFuture<>();
            long begin = System.nanoTime();
            assertFalse(client.awaitBlocking(never, TimeUnit.MILLISECONDS.toNanos(100)));
            long waited = System.nanoTime() - begin;
            assertTrue(waited >= TimeUnit.MILLISECONDS.toNanos(100), "gave up early: " + waited / 1_000 + " us");
            assertTrue(waited < TimeUnit.SECONDS.toNanos(5), "gave up late: " + waited / 1_000_000 + " ms");
        }
        for (Thread c : callers) {
            c.join(60_000);
            assertFalse(c.isAlive(), "a caller hangs");
        }
        if (!errors.isEmpty()) {
            throw new AssertionError(errors.size() + " caller errors", errors.peek());
        }
        assertTrue(problems.isEmpty(), problems.size() + " problems, first: " + problems.peek());
        for (int t = 0; t < threads; t++) {
            assertEquals(ROUNDS, next.get(t));
        }
    }

    @Test
    void callersAsleepWhenThePeerFailsOrTheTransportClosesAllReturn() throws Exception {
        TransportConfig config = TransportConfig.defaults("shm").withPools(64L << 20, 64L << 20, 32L << 20);
        int threads = 6;
        AtomicReferenceArray<CompletableFuture<Long>> waiting = new AtomicReferenceArray<>(threads);
        AtomicLongArray next = new AtomicLongArray(threads);
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        MessageHandler replies = replies(waiting, next, problems);
        Transport client = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                replies.onMessage(from, message);
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                for (int t = 0; t < threads; t++) { // as RPC fails its calls to a lost peer
                    CompletableFuture<Long> f = waiting.get(t);
                    if (f != null) {
                        f.completeExceptionally(cause);
                    }
                }
            }
        });
        // A server that never answers: the callers sleep until it fails under them.
        Transport silent = open(config, (from, m) -> m.release());
        Peer peer = client.connect(silent.localAddress());
        List<Thread> callers = new ArrayList<>();
        Queue<Boolean> outcomes = new ConcurrentLinkedQueue<>();
        CountDownLatch sent = new CountDownLatch(threads);
        for (int t = 0; t < threads; t++) {
            int stream = t;
            callers.add(Thread.ofPlatform().start(() -> {
                CompletableFuture<Long> reply = new CompletableFuture<>();
                waiting.set(stream, reply);
                OutboundMessage request = peer.allocate(64);
                fill(request.segment(), stream, 0);
                peer.sendWatched(stream, request, (v, e) -> { });
                sent.countDown();
                outcomes.add(client.awaitBlocking(reply, TimeUnit.SECONDS.toNanos(60)));
            }));
        }
        assertTrue(sent.await(10, TimeUnit.SECONDS));
        Thread.sleep(50);
        long closedAt = System.nanoTime();
        silent.close();
        for (Thread c : callers) {
            c.join(20_000);
            assertFalse(c.isAlive(), "a caller asleep when its peer failed still sleeps");
        }
        assertTrue(System.nanoTime() - closedAt < TimeUnit.SECONDS.toNanos(15));
        assertEquals(threads, outcomes.size());
        assertTrue(outcomes.stream().allMatch(b -> b), "each wait ended done: its future failed");

        // A new peer is served: the word was not left disarmed with nobody to poll.
        Transport server = echo(config);
        Peer fresh = client.connect(server.localAddress());
        for (int t = 0; t < threads; t++) {
            next.set(t, 0);
        }
        callers.clear();
        Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
        for (int t = 0; t < threads; t++) {
            int stream = t;
            callers.add(Thread.ofPlatform().start(() -> {
                try {
                    for (int seq = 0; seq < 100; seq++) {
                        CompletableFuture<Long> reply = new CompletableFuture<>();
                        waiting.set(stream, reply);
                        OutboundMessage request = fresh.allocate(size(stream, seq));
                        fill(request.segment(), stream, seq);
                        fresh.sendWatched(stream, request, (v, e) -> { });
                        assertTrue(client.awaitBlocking(reply, TimeUnit.SECONDS.toNanos(20)), "reply " + seq);
                        assertEquals(seq, reply.getNow(-1L));
                    }
                } catch (Throwable e) {
                    errors.add(e);
                }
            }));
        }
        for (Thread c : callers) {
            c.join(60_000);
        }
        if (!errors.isEmpty()) {
            throw new AssertionError(errors.size() + " caller errors", errors.peek());
        }
        assertTrue(problems.isEmpty(), problems.size() + " problems, first: " + problems.peek());

        // Callers asleep when their own transport closes return at once, not at their deadline.
        List<Thread> sleepers = new ArrayList<>();
        CountDownLatch waitingNow = new CountDownLatch(threads);
        Queue<Boolean> closedOutcomes = new ConcurrentLinkedQueue<>();
        for (int t = 0; t < threads; t++) {
            sleepers.add(Thread.ofPlatform().start(() -> {
                waitingNow.countDown();
                closedOutcomes.add(client.awaitBlocking(new CompletableFuture<Void>(), TimeUnit.SECONDS.toNanos(60)));
            }));
        }
        assertTrue(waitingNow.await(10, TimeUnit.SECONDS));
        Thread.sleep(50);
        long closing = System.nanoTime();
        client.close();
        for (Thread s : sleepers) {
            s.join(20_000);
            assertFalse(s.isAlive(), "a caller asleep on a closed transport's doorbell still sleeps");
        }
        assertTrue(System.nanoTime() - closing < TimeUnit.SECONDS.toNanos(15));
        assertEquals(threads, closedOutcomes.size());
        assertTrue(closedOutcomes.stream().noneMatch(b -> b));
    }
}
