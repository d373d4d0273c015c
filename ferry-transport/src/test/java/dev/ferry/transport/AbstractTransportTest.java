package dev.ferry.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The behavioural suite every transport passes, through the public API only ({@link
 * Transports#open}): exactly-once in-order delivery per stream with contents checked, send and
 * receive back-pressure with bounded memory, counter invariants, no leaked buffers, fairness
 * across many peers, and failure of a peer mid-stream. A transport module subclasses it and
 * names its configuration; the sizes scale with {@code -Dferry.test.scale=ci|full}.
 *
 * <p>Contracts this suite pins down beyond the Javadoc of the API:
 * <ul>
 *   <li>a receiver holds at most {@code linksPerPeer * receiveBuffersPerLink} unreleased
 *       messages (of eager size) from one peer before that peer's sends wait;</li>
 *   <li>a message may be released after its transport closed;</li>
 *   <li>{@code bytesInFlight} counts message bytes (not headers) and never exceeds
 *       {@code sendWindowBytesPerProcess} while no single message is larger than that window.</li>
 * </ul>
 */
public abstract class AbstractTransportTest {

    /** {@code full} under {@code -Pfull}: the figures of the issue; {@code ci} otherwise. */
    protected static final boolean FULL = "full".equals(System.getProperty("ferry.test.scale", "ci"));

    private final List<Transport> opened = new CopyOnWriteArrayList<>();

    /** The configuration under test; each test adjusts windows and pools from it. */
    protected abstract TransportConfig config();

    /** Messages of the mixed-size run (besides the large ones). */
    protected int mixedMessages() {
        return FULL ? 20_000 : 5_000;
    }

    /** Streams the mixed-size run spreads its messages over. */
    protected int mixedStreams() {
        return FULL ? 1_000 : 200;
    }

    /** Large messages (1 MiB up to {@link #largestMessage()}) mixed into the run. */
    protected int largeMessages() {
        return FULL ? 50 : 6;
    }

    /** The largest message of the mixed-size run. */
    protected int largestMessage() {
        return FULL ? 64 << 20 : 16 << 20;
    }

    /** How long the stalled receiver holds everything. */
    protected long stallMillis() {
        return FULL ? 5_000 : 2_000;
    }

    /** Client transports sharing one receiver in the fairness test. */
    protected int clientPeers() {
        return 64;
    }

    /** How long the clients of the fairness test send. */
    protected long fairnessMillis() {
        return FULL ? 5_000 : 2_000;
    }

    /** Implementation-specific leak checks (e.g. Netty's leak detector), after every test. */
    protected void assertNoLeaks() {
    }

    /** Opens a transport that the test closes at its end. */
    protected Transport open(TransportConfig config, MessageHandler handler) {
        Transport transport = Transports.open(config, handler);
        opened.add(transport);
        return transport;
    }

    @AfterEach
    void closeTransports() {
        List<Long> held = new ArrayList<>();
        for (Transport transport : opened) {
            // A send completes once the receiving transport has the message, perhaps before its
            // handler has returned: a handler that releases may still be running.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (transport.counters().receiveBuffersHeld() != 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
                Thread.yield();
            }
            held.add(transport.counters().receiveBuffersHeld());
            transport.close();
        }
        opened.clear();
        for (long h : held) {
            assertEquals(0, h, "a transport ended with received messages not released");
        }
        assertNoLeaks();
    }

    // ---------------------------------------------------------------------------------------
    // Exactly once, in order, intact

    @Test
    @Timeout(180)
    void manyStreamsOfMixedSizesArriveExactlyOnceInOrder() throws Exception {
        TransportConfig base = config();
        // Four senders may each hold a message of the largest size: the send pool must fit them.
        long send = Math.max(base.sendPoolBytes(), 4L * (largestMessage() + (1 << 20)));
        TransportConfig config = base.withPools(send, base.receivePoolBytes(),
                Math.max(base.rendezvousPoolBytes(), 2L * largestMessage()));
        int streams = mixedStreams();
        int[][] sizes = plan(streams, mixedMessages(), largeMessages(), largestMessage());
        int total = 0;
        for (int[] stream : sizes) {
            total += stream.length;
        }
        Receiver receiver = new Receiver(sizes);
        Transport server = open(config, receiver);
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());

        Sampler sampler = new Sampler(config, client, server).start();
        int threads = 4;
        List<Thread> senders = new ArrayList<>();
        ConcurrentLinkedQueue<CompletableFuture<Void>> futures = new ConcurrentLinkedQueue<>();
        AtomicReference<Throwable> senderFailure = new AtomicReference<>();
        for (int t = 0; t < threads; t++) {
            int first = t;
            senders.add(Thread.ofPlatform().name("sender-" + t).start(() -> {
                try {
                    int longest = 0;
                    for (int s = first; s < streams; s += threads) {
                        longest = Math.max(longest, sizes[s].length);
                    }
                    for (int seq = 0; seq < longest; seq++) {
                        for (int s = first; s < streams; s += threads) {
                            if (seq < sizes[s].length) {
                                futures.add(peer.send(s, filled(peer, s, seq, sizes[s][seq])));
                            }
                        }
                    }
                } catch (Throwable e) {
                    senderFailure.set(e);
                }
            }));
        }
        for (Thread sender : senders) {
            sender.join();
        }
        assertNull(senderFailure.get(), () -> "a sender failed: " + senderFailure.get());
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
        assertTrue(receiver.awaitAll(total, 120), () -> "delivered " + receiver.delivered.get() + " of " + receiver.expected);
        Thread.sleep(100);
        sampler.stop();

        receiver.assertComplete();
        assertEquals(total, server.counters().messagesReceived());
        assertEquals(total, client.counters().messagesSent());
        long bytes = 0;
        for (int[] stream : sizes) {
            for (int size : stream) {
                bytes += size;
            }
        }
        assertEquals(bytes, server.counters().bytesReceived());
        assertEquals(bytes, client.counters().bytesSent());
        int links = client.counters().linksOpen();
        assertTrue(links >= 1 && links <= config.linksPerPeer(),
                "streams must share at most linksPerPeer links: " + links);
        sampler.assertInvariants();
        assertEquals(0, server.counters().receiveBuffersHeld());
    }

    // ---------------------------------------------------------------------------------------
    // Back-pressure

    @Test
    @Timeout(120)
    void stalledReceiverSlowsSendersAndLosesNothing() throws Exception {
        long stall = stallMillis();
        TransportConfig config = smallWindows(config())
                .withPools(4L << 20, config().receivePoolBytes(), config().rendezvousPoolBytes())
                .withConnectTimeoutMillis(Math.max(config().connectTimeoutMillis(), stall + 20_000));
        int size = 4096;
        int streams = 8;
        int perStream = (int) ((FULL ? 128L << 20 : 32L << 20) / size / streams);
        int[][] sizes = new int[streams][perStream];
        for (int[] stream : sizes) {
            java.util.Arrays.fill(stream, size);
        }
        Receiver receiver = new Receiver(sizes);
        receiver.hold.set(true);
        Transport server = open(config, receiver);
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        Sampler sampler = new Sampler(config, client, server).start();

        AtomicInteger sent = new AtomicInteger();
        AtomicReference<Throwable> senderFailure = new AtomicReference<>();
        List<CompletableFuture<Void>> futures = new CopyOnWriteArrayList<>();
        Thread sender = Thread.ofPlatform().name("sender").start(() -> {
            try {
                for (int seq = 0; seq < perStream; seq++) {
                    for (int s = 0; s < streams; s++) {
                        futures.add(peer.send(s, filled(peer, s, seq, size)));
                        sent.incrementAndGet();
                    }
                }
            } catch (Throwable e) {
                senderFailure.set(e);
            }
        });

        Thread.sleep(stall);
        long heldBefore = server.counters().receiveBuffersHeld();
        Thread.sleep(300);
        TransportCounters serverCounters = server.counters();
        TransportCounters clientCounters = client.counters();
        int total = streams * perStream;
        long bound = (long) config.linksPerPeer() * config.receiveBuffersPerLink();
        assertNull(senderFailure.get(), () -> "the sender failed while the receiver stalled: " + senderFailure.get());
        assertTrue(sender.isAlive() && sent.get() < total, "the sender did not wait: sent " + sent.get() + " of " + total);
        assertTrue(serverCounters.receiveBuffersHeld() > 0, "nothing arrived at all");
        assertTrue(serverCounters.receiveBuffersHeld() <= bound,
                "receiver holds " + serverCounters.receiveBuffersHeld() + " messages, more than " + bound);
        assertEquals(heldBefore, serverCounters.receiveBuffersHeld(), "held messages kept growing while stalled");
        assertEquals(receiver.held.size(), serverCounters.receiveBuffersHeld());
        assertTrue(clientCounters.windowStalls() + clientCounters.creditStalls() + serverCounters.creditStalls() > 0,
                "no stall counted: " + clientCounters);
        assertTrue(clientCounters.bytesInFlight() <= config.sendWindowBytesPerProcess());

        receiver.releaseHeldAndFlow();
        sender.join(60_000);
        assertFalse(sender.isAlive());
        assertNull(senderFailure.get(), () -> "the sender failed: " + senderFailure.get());
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        assertTrue(receiver.awaitAll(total, 60), () -> "delivered " + receiver.delivered.get() + " of " + total);
        Thread.sleep(100);
        sampler.stop();
        receiver.assertComplete();
        sampler.assertInvariants();
        assertEquals(0, server.counters().receiveBuffersHeld());
    }

    @Test
    @Timeout(120)
    void sendWindowCapsBytesInFlightAcrossPeers() throws Exception {
        TransportConfig config = smallWindows(config());
        int streams = 16;
        int perStream = FULL ? 500 : 120;
        int[][] sizes = new int[streams][perStream];
        for (int s = 0; s < streams; s++) {
            for (int q = 0; q < perStream; q++) {
                sizes[s][q] = logUniform(mix(s, q, 3), 64 * 1024);
            }
        }
        Receiver first = new Receiver(sizes);
        Receiver second = new Receiver(sizes);
        Transport serverA = open(config, first);
        Transport serverB = open(config, second);
        Transport client = open(config, (from, message) -> message.release());
        Peer a = client.connect(serverA.localAddress());
        Peer b = client.connect(serverB.localAddress());
        Sampler sampler = new Sampler(config, client, serverA, serverB).start();

        List<CompletableFuture<Void>> futures = new CopyOnWriteArrayList<>();
        AtomicReference<Throwable> senderFailure = new AtomicReference<>();
        List<Thread> senders = new ArrayList<>();
        for (Peer peer : List.of(a, b)) {
            for (int half = 0; half < 2; half++) {
                int offset = half;
                senders.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (int q = 0; q < perStream; q++) {
                            for (int s = offset; s < streams; s += 2) {
                                futures.add(peer.send(s, filled(peer, s, q, sizes[s][q])));
                            }
                        }
                    } catch (Throwable e) {
                        senderFailure.set(e);
                    }
                }));
            }
        }
        for (Thread sender : senders) {
            sender.join();
        }
        assertNull(senderFailure.get(), () -> "a sender failed: " + senderFailure.get());
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        int total = streams * perStream;
        assertTrue(first.awaitAll(total, 60) && second.awaitAll(total, 60), "not everything arrived");
        sampler.stop();
        first.assertComplete();
        second.assertComplete();
        sampler.assertInvariants();
        TransportCounters counters = client.counters();
        assertTrue(counters.windowStalls() > 0, "the send window never filled: " + counters);
        assertTrue(counters.peakBytesInFlight() > 0 && counters.peakBytesInFlight() <= config.sendWindowBytesPerProcess(),
                "peak " + counters.peakBytesInFlight() + " against window " + config.sendWindowBytesPerProcess());
        assertEquals(0, counters.bytesInFlight(), "bytes still in flight after every send completed");
    }

    @Test
    @Timeout(60)
    void tryAllocateReturnsNullWhenTheSendPoolIsExhausted() throws Exception {
        long pool = 1L << 20;
        TransportConfig config = config().withPools(pool, config().receivePoolBytes(), config().rendezvousPoolBytes())
                .withConnectTimeoutMillis(500);
        Transport server = open(config, (from, message) -> message.release());
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        int size = 64 * 1024;
        List<OutboundMessage> taken = new ArrayList<>();
        OutboundMessage next;
        long slowest = 0;
        while (true) {
            long start = System.nanoTime();
            next = peer.tryAllocate(size);
            slowest = Math.max(slowest, System.nanoTime() - start);
            if (next == null) {
                break;
            }
            taken.add(next);
            assertTrue(taken.size() <= 2 * pool / size, "tryAllocate never ran out: " + taken.size() + " buffers");
        }
        assertFalse(taken.isEmpty());
        assertTrue(slowest < TimeUnit.MILLISECONDS.toNanos(200), "tryAllocate blocked for " + slowest + " ns");

        long start = System.nanoTime();
        assertThrows(TransportException.class, () -> peer.allocate(size), "allocate must give up after the timeout");
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(waited >= 400 && waited < 5_000, "allocate waited " + waited + " ms for a 500 ms timeout");

        for (OutboundMessage message : taken) {
            message.release();
        }
        OutboundMessage again = peer.tryAllocate(size);
        assertNotNull(again, "released buffers did not return to the pool");
        again.release();
        assertThrows(TransportException.class, () -> peer.allocate(config.maxMessageSize() + 1));
    }

    @Test
    @Timeout(60)
    void trySendReturnsFalseUnderBackPressureAndTheCallerKeepsTheBuffer() throws Exception {
        TransportConfig config = smallWindows(config())
                .withPools(8L << 20, config().receivePoolBytes(), config().rendezvousPoolBytes());
        int size = 4096;
        int streams = 4;
        int limit = 200_000;
        int[][] sizes = new int[streams][limit];
        for (int[] stream : sizes) {
            java.util.Arrays.fill(stream, size);
        }
        Receiver receiver = new Receiver(sizes);
        receiver.hold.set(true);
        Transport server = open(config, receiver);
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());

        int[] accepted = new int[streams];
        boolean refused = false;
        long slowest = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (int i = 0; i < streams * limit && !refused && System.nanoTime() < deadline; i++) {
            int s = i % streams;
            OutboundMessage message = peer.tryAllocate(size);
            if (message == null) {
                Thread.sleep(1);
                continue;
            }
            fill(message.segment(), s, accepted[s]);
            long start = System.nanoTime();
            boolean taken = peer.trySend(s, message);
            slowest = Math.max(slowest, System.nanoTime() - start);
            if (taken) {
                accepted[s]++;
            } else {
                refused = true;
                // The caller still owns the buffer: it can read it and must release it.
                assertEquals(size, message.segment().byteSize());
                message.release();
            }
        }
        assertTrue(refused, "trySend never refused a message while the receiver held everything");
        assertTrue(slowest < TimeUnit.MILLISECONDS.toNanos(200), "trySend blocked for " + slowest + " ns");

        int total = 0;
        for (int s = 0; s < streams; s++) {
            total += accepted[s];
        }
        receiver.releaseHeldAndFlow();
        assertTrue(receiver.awaitAll(total, 60), () -> "delivered " + receiver.delivered.get());
        Thread.sleep(100);
        for (int s = 0; s < streams; s++) {
            assertEquals(accepted[s], receiver.next.get(s), "stream " + s + ": accepted and delivered differ");
        }
        assertEquals(total, receiver.delivered.get());
        assertTrue(receiver.errors.isEmpty(), () -> String.join("\n", receiver.errors));
    }

    @Test
    @Timeout(60)
    void releasedMessagesLeaveNothingHeld() throws Exception {
        int count = 20;
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        CountDownLatch arrived = new CountDownLatch(count);
        Transport server = open(config(), (from, message) -> {
            held.add(message);
            arrived.countDown();
        });
        Transport client = open(config(), (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        for (int i = 0; i < count; i++) {
            peer.send(1, filled(peer, 1, i, 100 * i)).get(10, TimeUnit.SECONDS);
        }
        assertTrue(arrived.await(10, TimeUnit.SECONDS));
        assertEquals(count, server.counters().receiveBuffersHeld());
        long repostsBefore = server.counters().reposts();
        Thread releaser = Thread.ofPlatform().start(() -> {
            for (InboundMessage message : held) {
                message.release();
            }
        });
        releaser.join();
        assertEquals(0, server.counters().receiveBuffersHeld());
        assertEquals(repostsBefore + count, server.counters().reposts());
        assertTrue(server.counters().creditsAvailable() >= 0);
    }

    // ---------------------------------------------------------------------------------------
    // Peers

    @Test
    @Timeout(60)
    void closingAPeerFailsItsPendingSendsAndTellsBothSides() throws Exception {
        TransportConfig config = smallWindows(config());
        java.util.Queue<InboundMessage> held = new java.util.concurrent.ConcurrentLinkedQueue<>();
        AtomicBoolean holding = new AtomicBoolean(true);
        CountDownLatch serverSawClose = new CountDownLatch(1);
        CountDownLatch lastReleased = new CountDownLatch(1);
        Transport server = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                if (holding.get()) {
                    held.add(message);
                } else {
                    int stream = message.stream();
                    message.release();
                    if (stream == 1) {
                        lastReleased.countDown();
                    }
                }
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                serverSawClose.countDown();
            }
        });
        CountDownLatch clientSawClose = new CountDownLatch(1);
        Transport client = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                clientSawClose.countDown();
            }
        });
        Peer peer = client.connect(server.localAddress());
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        try {
            // The server holds everything, so sends pile up behind credits and the window.
            for (int seq = 0; seq < 2_000; seq++) {
                OutboundMessage message = peer.tryAllocate(4096);
                if (message == null) {
                    break;
                }
                fill(message.segment(), 0, seq);
                futures.add(peer.send(0, message));
            }
            assertTrue(waitFor(() -> !held.isEmpty(), 10_000), "nothing arrived");
            assertTrue(futures.stream().anyMatch(f -> !f.isDone()), "no send was pending");
            peer.close();
            peer.close();
            assertTrue(clientSawClose.await(10, TimeUnit.SECONDS), "the closing side's handler was not told");
            assertFalse(peer.isOpen());
            int failed = 0;
            for (CompletableFuture<Void> future : futures) {
                try {
                    future.get(10, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    assertInstanceOf(TransportException.class, e.getCause());
                    failed++;
                }
            }
            assertTrue(failed > 0, "no pending send failed");
        } finally {
            holding.set(false);
            releaseAll(held);
        }
        // A receiver that holds every buffer may learn of the close only once it reads again.
        assertTrue(serverSawClose.await(10, TimeUnit.SECONDS), "the other side's handler was not told");
        // A handler that read "holding" just before it was switched off may add its message after
        // any one release: release until the server holds nothing.
        assertTrue(waitFor(() -> {
            releaseAll(held);
            return server.counters().receiveBuffersHeld() == 0;
        }, 10_000), "received messages left held after the close");
        Peer again = client.connect(server.localAddress());
        assertTrue(again != peer && again.isOpen(), "connect after close must open a new peer");
        again.send(1, filled(again, 1, 0, 10)).get(10, TimeUnit.SECONDS);
        // A send may complete once written (tcp), before the server has read it: the message is
        // waited for, so that the end-of-test count of held buffers does not race its arrival.
        assertTrue(lastReleased.await(10, TimeUnit.SECONDS), "the message sent after the close never arrived");
    }

    private static void releaseAll(java.util.Queue<InboundMessage> messages) {
        for (InboundMessage message; (message = messages.poll()) != null; ) {
            message.release();
        }
    }

    @Test
    @Timeout(60)
    void bothSidesSeeTheSamePeer() throws Exception {
        AtomicReference<Peer> seenByServer = new AtomicReference<>();
        CountDownLatch serverGot = new CountDownLatch(1);
        Transport server = open(config(), (from, message) -> {
            seenByServer.set(from);
            message.release();
            serverGot.countDown();
        });
        AtomicReference<Peer> seenByClient = new AtomicReference<>();
        CountDownLatch clientGot = new CountDownLatch(1);
        Transport client = open(config(), (from, message) -> {
            seenByClient.set(from);
            message.release();
            clientGot.countDown();
        });
        Peer peer = client.connect(server.localAddress());
        assertSame(peer, client.connect(server.localAddress()), "connect must return the same peer for an address");
        assertEquals(server.localAddress(), peer.address());
        peer.send(7, filled(peer, 7, 0, 10)).get(10, TimeUnit.SECONDS);
        assertTrue(serverGot.await(10, TimeUnit.SECONDS));
        Peer back = seenByServer.get();
        assertEquals(client.localAddress(), back.address(), "the acceptor must know the connector by its listen address");
        assertSame(back, server.connect(client.localAddress()), "the acceptor's connect must find the accepted peer");
        back.send(9, filled(back, 9, 0, 33)).get(10, TimeUnit.SECONDS);
        assertTrue(clientGot.await(10, TimeUnit.SECONDS));
        assertSame(peer, seenByClient.get());
    }

    /** Whether every client delivered something and the slowest at least 1/{@code ratio} of the fastest. */
    private static boolean withinRatio(Map<String, AtomicLong> perPeer, List<Transport> clients, int ratio) {
        long min = Long.MAX_VALUE;
        long max = 0;
        for (Transport client : clients) {
            AtomicLong got = perPeer.get(client.localAddress());
            long n = got == null ? 0 : got.get();
            min = Math.min(min, n);
            max = Math.max(max, n);
        }
        return min > 0 && min * ratio >= max;
    }

    @Test
    @Timeout(240)
    protected void manyPeersSharingOneReceiverAllMakeProgress() throws Exception {
        int clients = clientPeers();
        int streams = 2;
        TransportConfig config = config();
        Map<String, AtomicLong> perPeer = new ConcurrentHashMap<>();
        Map<String, int[]> nextSeq = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        Transport server = open(config, (from, message) -> {
            try {
                int[] next = nextSeq.computeIfAbsent(from.address(), a -> new int[streams]);
                int s = message.stream();
                String problem = check(message.segment(), s, next[s], 1024);
                if (problem != null) {
                    errors.add(from.address() + ": " + problem);
                }
                next[s]++;
                perPeer.computeIfAbsent(from.address(), a -> new AtomicLong()).incrementAndGet();
            } finally {
                message.release();
            }
        });
        List<Transport> clientTransports = new ArrayList<>();
        List<Peer> peers = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            Transport client = open(config, (from, message) -> message.release());
            clientTransports.add(client);
            peers.add(client.connect(server.localAddress()));
        }
        // Before the window, each client takes and returns one send buffer: a client's first
        // buffer may come from a fresh slab of its pool, zeroed page by page, which costs tens of
        // milliseconds per client on a loaded machine. That is start-up, not what this test
        // measures; the links, by contrast, still open inside the window.
        for (Peer peer : peers) {
            peer.allocate(1024).release();
        }

        // One sender thread per client, which keeps at most outstandingLimit sends pending and
        // waits (it does not spin) while that many are: a send that blocks its caller, say until
        // a link is up, or a thread that is descheduled holds back its own client only. So every
        // client is offered sends as fast as its sends complete, and any imbalance is the
        // transport's.
        AtomicBoolean stop = new AtomicBoolean();
        int outstandingLimit = 16;
        AtomicIntegerArray outstanding = new AtomicIntegerArray(clients);
        long[] sent = new long[clients];
        AtomicReference<Throwable> senderFailure = new AtomicReference<>();
        List<Thread> senders = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            int client = c;
            Peer peer = peers.get(c);
            java.util.concurrent.Semaphore permits = new java.util.concurrent.Semaphore(outstandingLimit);
            senders.add(Thread.ofPlatform().start(() -> {
                try {
                    int[] seq = new int[streams];
                    while (!stop.get()) {
                        if (!permits.tryAcquire(10, TimeUnit.MILLISECONDS)) {
                            continue;
                        }
                        int s = (int) (sent[client] % streams);
                        outstanding.incrementAndGet(client);
                        peer.send(s, filled(peer, s, seq[s]++, 1024)).whenComplete((v, e) -> {
                            outstanding.decrementAndGet(client);
                            permits.release();
                            if (e != null) {
                                senderFailure.compareAndSet(null, e);
                            }
                        });
                        sent[client]++;
                    }
                } catch (Throwable e) {
                    senderFailure.compareAndSet(null, e);
                }
            }));
        }
        // 64 client transports and their senders are over a hundred threads on a few cores: the
        // scheduler can leave one of them without a core for a good part of the window. A peer
        // the transport starves stays behind however long the clients send; one the scheduler
        // held back catches up. So the window grows (up to five times) until the counts are
        // within half the bound checked below.
        Thread.sleep(fairnessMillis());
        long extendedUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(4 * fairnessMillis());
        while (System.nanoTime() < extendedUntil && !withinRatio(perPeer, clientTransports, 25)) {
            Thread.sleep(50);
        }
        stop.set(true);
        for (Thread sender : senders) {
            sender.join();
        }
        boolean completed = waitFor(() -> {
            for (int c = 0; c < clients; c++) {
                if (outstanding.get(c) != 0) {
                    return false;
                }
            }
            return true;
        }, 60_000);
        if (!completed) {
            // Seen once in some thirty runs of the module on shm: say which clients and where their threads are.
            StringBuilder stuck = new StringBuilder("sends never completed; server " + server.counters());
            for (int c = 0; c < clients; c++) {
                if (outstanding.get(c) != 0) {
                    stuck.append("\nclient ").append(c).append(' ').append(clientTransports.get(c).localAddress())
                            .append(": ").append(outstanding.get(c)).append(" outstanding, ").append(sent[c])
                            .append(" sent, ").append(clientTransports.get(c).counters());
                }
            }
            Thread.getAllStackTraces().forEach((thread, stack) -> {
                if (thread.getName().startsWith("ferry")) {
                    stuck.append("\n\"").append(thread.getName()).append("\" ").append(thread.getState());
                    for (StackTraceElement frame : stack) {
                        stuck.append("\n    at ").append(frame);
                    }
                }
            });
            System.out.println(stuck);
            fail(stuck.toString().lines().limit(70).collect(Collectors.joining("\n")));
        }
        assertNull(senderFailure.get(), () -> "a send failed: " + senderFailure.get());
        long total = 0;
        for (long n : sent) {
            total += n;
        }
        long expected = total;
        assertTrue(waitFor(() -> server.counters().messagesReceived() == expected, 60_000),
                () -> "received " + server.counters().messagesReceived() + " of " + expected);
        assertTrue(errors.isEmpty(), () -> String.join("\n", errors));
        Set<String> addresses = ConcurrentHashMap.newKeySet();
        for (Transport client : clientTransports) {
            addresses.add(client.localAddress());
        }
        assertEquals(addresses, perPeer.keySet(), () -> "every client must be a distinct peer known by its address;"
                + " sent per client: " + java.util.Arrays.toString(sent));
        long min = Long.MAX_VALUE;
        long max = 0;
        for (int c = 0; c < clients; c++) {
            long got = perPeer.get(clientTransports.get(c).localAddress()).get();
            assertEquals(sent[c], got, "client " + c + " sent and delivered differ");
            min = Math.min(min, got);
            max = Math.max(max, got);
        }
        long slowest = min;
        long fastest = max;
        assertTrue(min > 0 && min * 50 >= max, () -> "starvation: the slowest peer delivered " + slowest + ", the fastest " + fastest
                + "; per client: " + java.util.Arrays.toString(sent));
    }

    @Test
    @Timeout(60)
    void peerClosedMidStreamFailsPendingSendsAndTellsTheHandler() throws Exception {
        TransportConfig config = smallWindows(config())
                .withPools(2L << 20, config().receivePoolBytes(), config().rendezvousPoolBytes());
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        Transport server = open(config, (from, message) -> held.add(message));
        AtomicReference<Peer> closedPeer = new AtomicReference<>();
        AtomicReference<Throwable> closedCause = new AtomicReference<>();
        CountDownLatch closed = new CountDownLatch(1);
        Transport client = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                closedPeer.set(peer);
                closedCause.set(cause);
                closed.countDown();
            }
        });
        Peer peer = client.connect(server.localAddress());
        OutboundMessage spare = peer.allocate(64);

        List<CompletableFuture<Void>> futures = new CopyOnWriteArrayList<>();
        AtomicReference<Throwable> senderEnd = new AtomicReference<>();
        Thread sender = Thread.ofPlatform().start(() -> {
            try {
                for (int seq = 0; peer.isOpen(); seq++) {
                    futures.add(peer.send(seq % 4, filled(peer, seq % 4, seq / 4, 4096)));
                }
            } catch (Throwable e) {
                senderEnd.set(e);
            }
        });
        try {
            // Wait until the sender is stuck: sends pending, and no new send for half a second.
            int[] last = {-1};
            int[] quiet = {0};
            assertTrue(waitFor(() -> {
                int count = futures.size();
                boolean pending = !held.isEmpty() && futures.stream().anyMatch(f -> !f.isDone());
                quiet[0] = pending && count == last[0] ? quiet[0] + 1 : 0;
                last[0] = count;
                if (quiet[0] < 5) {
                    sleepQuietly(100);
                    return false;
                }
                return true;
            }, 30_000), "the sender never got stuck with sends pending");
            server.close();
        } finally {
            for (InboundMessage message : held) {
                message.release();
            }
        }
        assertTrue(closed.await(20, TimeUnit.SECONDS), "onPeerClosed never came");
        assertSame(peer, closedPeer.get());
        assertNotNull(closedCause.get());
        sender.join(20_000);
        assertFalse(sender.isAlive(), "the sender is stuck on a failed peer");
        if (senderEnd.get() != null) {
            assertInstanceOf(TransportException.class, senderEnd.get(), "the sender ended with " + senderEnd.get());
        }
        int failed = 0;
        for (CompletableFuture<Void> future : futures) {
            try {
                future.get(20, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                assertInstanceOf(TransportException.class, e.getCause());
                failed++;
            }
        }
        assertTrue(failed > 0, "no pending send failed when the peer closed");

        assertFalse(peer.isOpen());
        assertThrows(TransportException.class, () -> peer.allocate(16), "allocate to a failed peer");
        CompletableFuture<Void> late = peer.send(0, spare);
        CompletionException late1 = assertThrows(CompletionException.class, () -> late.join());
        assertInstanceOf(TransportException.class, late1.getCause());
        assertThrows(TransportException.class, () -> client.connect(server.localAddress()),
                "connecting to a closed transport must fail");
    }

    @Test
    @Timeout(60)
    void connectToAPortWithoutListenerFails() throws Exception {
        long timeout = 2_000;
        Transport client = open(config().withConnectTimeoutMillis(timeout), (from, message) -> message.release());
        long start;
        try (RefusedPort refused = RefusedPort.onLoopback()) {
            start = System.nanoTime();
            assertThrows(TransportException.class, () -> client.connect(refused.address()));
        }
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took < timeout + 3_000, "connect took " + took + " ms with a timeout of " + timeout);
        // The transport still works afterwards.
        Transport server = open(config(), (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        peer.send(1, filled(peer, 1, 0, 10)).get(10, TimeUnit.SECONDS);
    }

    // ---------------------------------------------------------------------------------------
    // Helpers

    /**
     * The host transports under test bind to: loopback by default; {@code -Dferry.host} names the
     * address of an RDMA interface, since verbs has no loopback device.
     */
    protected static final String HOST = System.getProperty("ferry.host", "127.0.0.1");

    /** {@code config} bound to {@link #HOST}. */
    protected static TransportConfig onTestHost(TransportConfig config) {
        return config.withBindHost(HOST);
    }

    /**
     * {@code config} with windows small enough that a test fills them, and enough credits that
     * the windows, not the credits, are what fills first (64 credits of eager-size messages are
     * more than a link's window).
     */
    protected static TransportConfig smallWindows(TransportConfig config) {
        return config.withFlowControl(16 * 1024, 64, 256 * 1024, 512 * 1024, 1 << 20);
    }

    /** Sizes per stream and sequence: log-uniform up to 256 KiB, some large ones spread in. */
    static int[][] plan(int streams, int messages, int large, int largest) {
        int[][] sizes = new int[streams][];
        for (int s = 0; s < streams; s++) {
            int count = messages / streams + (s < messages % streams ? 1 : 0);
            sizes[s] = new int[count];
            for (int q = 0; q < count; q++) {
                sizes[s][q] = logUniform(mix(s, q, 1), 256 * 1024);
            }
        }
        for (int i = 0; i < large; i++) {
            int s = (int) Math.floorMod(mix(i, 0, 2), (long) streams);
            int q = (int) Math.floorMod(mix(i, 1, 2), (long) Math.max(1, sizes[s].length));
            if (sizes[s].length == 0) {
                continue;
            }
            sizes[s][q] = i == 0 ? largest : (1 << 20) + logUniform(mix(i, 2, 2), largest - (1 << 20));
        }
        return sizes;
    }

    /** A size from 0 to {@code max}, uniform in log scale, from {@code random}. */
    protected static int logUniform(long random, int max) {
        double u = (random >>> 11) * 0x1.0p-53;
        return (int) Math.min(max, Math.floor(Math.exp(u * Math.log(max + 1.0))) - 1);
    }

    protected static long mix(long a, long b, long c) {
        long z = a * 0x9E3779B97F4A7C15L + b * 0xC2B2AE3D27D4EB4FL + c * 0x165667B19E3779F9L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** Allocates and fills a message of stream {@code stream}, number {@code seq}. */
    protected static OutboundMessage filled(Peer peer, int stream, int seq, int size) {
        OutboundMessage message = peer.allocate(size);
        fill(message.segment(), stream, seq);
        return message;
    }

    /** The pattern of ({@code stream}, {@code seq}): one long per 8 bytes, seeded by both. */
    protected static void fill(MemorySegment segment, int stream, int seq) {
        long size = segment.byteSize();
        long words = size / 8;
        for (long k = 0; k < words; k++) {
            segment.set(ValueLayout.JAVA_LONG_UNALIGNED, k * 8, mix(stream, seq, k));
        }
        long last = mix(stream, seq, words);
        for (long i = words * 8; i < size; i++) {
            segment.set(ValueLayout.JAVA_BYTE, i, (byte) (last >>> (8 * (i - words * 8))));
        }
    }

    /** Null if {@code segment} is message ({@code stream}, {@code seq}) of {@code size} bytes. */
    protected static String check(MemorySegment segment, int stream, int seq, int size) {
        if (segment.byteSize() != size) {
            return "stream " + stream + " message " + seq + ": " + segment.byteSize() + " bytes, expected " + size;
        }
        long words = size / 8;
        for (long k = 0; k < words; k++) {
            if (segment.get(ValueLayout.JAVA_LONG_UNALIGNED, k * 8) != mix(stream, seq, k)) {
                return "stream " + stream + " message " + seq + ": wrong bytes at offset " + k * 8;
            }
        }
        long last = mix(stream, seq, words);
        for (long i = words * 8; i < size; i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != (byte) (last >>> (8 * (i - words * 8)))) {
                return "stream " + stream + " message " + seq + ": wrong byte at offset " + i;
            }
        }
        return null;
    }

    private static void sleepQuietly(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    protected static boolean waitFor(BooleanSupplier condition, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /**
     * Checks every message against the plan: the next sequence number of its stream, its
     * size and its bytes. Problems are collected, not thrown, since it runs on the transport's
     * thread. While {@link #hold} is set it keeps messages instead of releasing them.
     */
    static final class Receiver implements MessageHandler {

        final int[][] sizes;
        final AtomicIntegerArray next;
        final AtomicInteger delivered = new AtomicInteger();
        final ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        final AtomicBoolean hold = new AtomicBoolean();
        final List<InboundMessage> held = new CopyOnWriteArrayList<>();
        final int expected;

        Receiver(int[][] sizes) {
            this.sizes = sizes;
            this.next = new AtomicIntegerArray(sizes.length);
            int total = 0;
            for (int[] stream : sizes) {
                total += stream.length;
            }
            this.expected = total;
        }

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            int s = message.stream();
            boolean keep = false;
            try {
                if (s < 0 || s >= sizes.length) {
                    errors.add("message on unknown stream " + s);
                    return;
                }
                int seq = next.getAndIncrement(s);
                if (seq >= sizes[s].length) {
                    errors.add("stream " + s + ": message " + seq + " is one too many (duplicate?)");
                    return;
                }
                String problem = check(message.segment(), s, seq, sizes[s][seq]);
                if (problem != null && errors.size() < 20) {
                    errors.add(problem);
                }
                synchronized (this) {
                    keep = hold.get();
                    if (keep) {
                        held.add(message);
                    }
                }
            } finally {
                if (!keep) {
                    message.release();
                }
                delivered.incrementAndGet();
            }
        }

        /** Stops holding and releases what was held. */
        void releaseHeldAndFlow() {
            synchronized (this) {
                hold.set(false);
            }
            for (InboundMessage message : held) {
                message.release();
            }
            held.clear();
        }

        boolean awaitAll(int count, long seconds) throws InterruptedException {
            return waitFor(() -> delivered.get() >= count, seconds * 1000);
        }

        void assertComplete() {
            assertTrue(errors.isEmpty(), () -> String.join("\n", errors));
            for (int s = 0; s < sizes.length; s++) {
                assertEquals(sizes[s].length, next.get(s), "stream " + s + " delivered count");
            }
            assertEquals(expected, delivered.get(), "delivered in total");
        }
    }

    /** Samples the counters while a test runs and checks the invariants on every sample. */
    static final class Sampler {

        private final TransportConfig config;
        private final Transport[] transports;
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        private final AtomicLong samples = new AtomicLong();
        private Thread thread;

        Sampler(TransportConfig config, Transport... transports) {
            this.config = config;
            this.transports = transports;
        }

        Sampler start() {
            thread = Thread.ofPlatform().daemon().name("counter-sampler").start(() -> {
                while (running.get()) {
                    for (Transport transport : transports) {
                        check(transport.counters());
                    }
                    samples.incrementAndGet();
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            return this;
        }

        private void check(TransportCounters c) {
            long window = config.sendWindowBytesPerProcess();
            if (c.bytesInFlight() < 0 || c.bytesInFlight() > window) {
                violations.add("bytesInFlight " + c.bytesInFlight() + " outside [0, " + window + "]");
            }
            if (c.peakBytesInFlight() > window) {
                violations.add("peakBytesInFlight " + c.peakBytesInFlight() + " over " + window);
            }
            if (c.creditsAvailable() < 0) {
                violations.add("creditsAvailable negative: " + c.creditsAvailable());
            }
            if (c.receiveBuffersHeld() < 0) {
                violations.add("receiveBuffersHeld negative: " + c.receiveBuffersHeld());
            }
        }

        void stop() throws InterruptedException {
            running.set(false);
            thread.join();
        }

        void assertInvariants() {
            for (Transport transport : transports) {
                check(transport.counters());
            }
            assertTrue(samples.get() > 0, "the sampler never ran");
            if (!violations.isEmpty()) {
                fail(violations.size() + " counter violations, first: " + violations.peek());
            }
        }
    }
}
