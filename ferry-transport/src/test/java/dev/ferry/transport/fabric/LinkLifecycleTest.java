package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

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
import dev.ferry.transport.TransportException;

/**
 * Links open when streams need them and never beyond {@code maxLinks}; the control channel's
 * heartbeats keep idle peers alive and declare silent ones failed.
 */
@Timeout(60)
class LinkLifecycleTest extends FabricTransportFixture {


    private static TransportConfig config(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 16L << 20);
    }

    /** Records each stream's sequence numbers in arrival order. */
    private static final class Recorder implements MessageHandler {
        final Map<Integer, List<Integer>> seen = new ConcurrentHashMap<>();

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            int stream = message.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0);
            int seq = message.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 4);
            seen.computeIfAbsent(stream, s -> new CopyOnWriteArrayList<>()).add(seq);
            message.release();
        }

        int count() {
            return seen.values().stream().mapToInt(List::size).sum();
        }

        void assertInOrder(int streams, int perStream) {
            for (int s = 0; s < streams; s++) {
                List<Integer> got = seen.get(s);
                assertEquals(perStream, got == null ? 0 : got.size(), "stream " + s + " count");
                for (int i = 0; i < perStream; i++) {
                    assertEquals(i, got.get(i), "stream " + s + " order");
                }
            }
        }
    }

    private static void sendAll(Peer peer, int streams, int perStream) throws Exception {
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < perStream; i++) {
            for (int s = 0; s < streams; s++) {
                OutboundMessage m = peer.allocate(64 + s * 300);
                m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 0, s);
                m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 4, i);
                futures.add(peer.send(s, m));
            }
        }
        for (CompletableFuture<Void> f : futures) {
            f.get(20, TimeUnit.SECONDS);
        }
    }

    @Test
    void aConnectedPeerOpensItsSecondLinkOnlyWhenAStreamNeedsIt() throws Exception {
        TransportConfig config = config("tcp").withLinks(2, 64);
        Recorder received = new Recorder();
        Transport server = open(config, received);
        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        assertEquals(1, client.counters().linksOpen(), "connect opens the first link only");
        sendAll(peer, 1, 20); // stream 0: the first link
        assertEquals(1, client.counters().linksOpen());
        sendAll(peer, 4, 50); // streams 1 and 3 need the second link
        assertTrue(waitFor(() -> client.counters().linksOpen() == 2 && server.counters().linksOpen() == 2, 10_000),
                "links: client " + client.counters().linksOpen() + ", server " + server.counters().linksOpen());
        assertTrue(waitFor(() -> received.count() == 20 + 200, 10_000));
        // Stream 0 saw 20 then 50 more, numbered from 0 again: check the streams that started fresh.
        for (int s = 1; s < 4; s++) {
            List<Integer> got = received.seen.get(s);
            assertEquals(50, got.size());
            for (int i = 0; i < 50; i++) {
                assertEquals(i, got.get(i));
            }
        }
    }

    @Test
    void theProcessCapOnLinksMakesRoutesShareTheFirstLink() throws Exception {
        Recorder received = new Recorder();
        Transport server = open(config("tcp").withLinks(2, 64), received);
        Transport client = open(config("tcp").withLinks(2, 1), (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        sendAll(peer, 6, 100);
        assertTrue(waitFor(() -> received.count() == 600, 10_000));
        received.assertInOrder(6, 100);
        assertEquals(1, client.counters().linksOpen());
        assertEquals(1, server.counters().linksOpen());
    }

    @Test
    void aLinkThePeerRefusesHandsItsQueuedMessagesToTheFirstLinkInOrder() throws Exception {
        Recorder received = new Recorder();
        // The server may hold one link in all: it refuses the client's second.
        Transport server = open(config("tcp").withLinks(2, 1), received);
        Transport client = open(config("tcp").withLinks(2, 64), (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        sendAll(peer, 6, 100);
        assertTrue(waitFor(() -> received.count() == 600, 10_000));
        received.assertInOrder(6, 100);
        assertEquals(1, server.counters().linksOpen());
        assertTrue(waitFor(() -> client.counters().linksOpen() == 1, 10_000));
        assertEquals(0, client.counters().linkFailures());
    }

    @Test
    void aPeerPastTheServersLinkCapIsToldWhyAndThePeersWithinItKeepWorking() throws Exception {
        Recorder received = new Recorder();
        Transport server = open(config("tcp").withLinks(1, 1), received);
        Transport first = open(config("tcp").withLinks(1, 64), (from, m) -> m.release());
        Peer peer = first.connect(server.localAddress());
        sendAll(peer, 1, 100);
        assertTrue(waitFor(() -> received.count() == 100, 10_000));

        Transport second = open(config("tcp").withLinks(1, 64), (from, m) -> m.release());
        TransportException refused = assertThrows(TransportException.class, () -> second.connect(server.localAddress()));
        assertTrue(refused.getMessage().contains("refused the connection: maxLinks (1) reached"), refused.getMessage());

        sendAll(peer, 1, 100);
        assertTrue(waitFor(() -> received.count() == 200, 10_000));
        assertEquals(1, server.counters().linksOpen());
        assertEquals(0, first.counters().linkFailures());
    }

    @Test
    void aHandshakeRefusedPartWayThroughItsLinksLeavesNoGrantBehind() throws Exception {
        // tcp's shared receive context (shm's peers have one link, made alone): a queue of 32
        // buffers holds eight links at the minimum grant, so a hello that asks for twelve has
        // eight made and the ninth refused. The eight must go with the refusal, their grants
        // with them, or the queue stays fully granted to links nobody has.
        TransportConfig config = TransportConfig.defaults("tcp").withPools(16L << 20, 1L << 20, 16L << 20)
                .withLinks(16, 4096);
        Recorder received = new Recorder();
        FabricTransport server = (FabricTransport) open(config, received);
        org.junit.jupiter.api.Assumptions.assumeTrue(server.sharesReceiveQueue(), "tcp links have receive queues of their own");
        int n = 12;
        String address = server.localAddress();
        int colon = address.lastIndexOf(':');
        try (java.net.Socket socket = new java.net.Socket(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))) {
            socket.setSoTimeout(10_000);
            var out = new java.io.DataOutputStream(socket.getOutputStream());
            var in = new java.io.DataInputStream(socket.getInputStream());
            HandshakeDescriptor.writeGreeting(out, false, new byte[dev.ferry.transport.SharedSecret.NONCE_BYTES]);
            HandshakeDescriptor.readStatus(address, in, true);
            HandshakeDescriptor.readNonce(in);
            HandshakeDescriptor.readBytes(in);
            HandshakeDescriptor.writeBytes(out, new byte[0]);
            int[] ids = new int[n];
            int[] grants = new int[n];
            for (int i = 0; i < n; i++) {
                ids[i] = i + 1;
                grants[i] = 8;
            }
            HandshakeDescriptor.writeHello(out, new HandshakeDescriptor.Hello("127.0.0.1:9", new byte[] {1, 2, 3, 4}, ids,
                    ids.clone(), grants, config.eagerThreshold(), "", 0, -1, "", false));
            out.flush();
            TransportException refused = assertThrows(TransportException.class,
                    () -> HandshakeDescriptor.readAnswer(address, in, n));
            assertTrue(refused.getMessage().contains("fully granted"), refused.getMessage());
        }
        assertTrue(waitFor(() -> server.sharedQueueUse()[2] == 0, 10_000),
                () -> "granted after the refusal: " + server.sharedQueueUse()[2] + "\n" + server.describeLinks());

        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        sendAll(peer, 1, 100);
        assertTrue(waitFor(() -> received.count() == 100, 10_000));
        assertEquals(1, server.counters().linksOpen());
        assertEquals(0, server.counters().linkFailures());
    }

    @ParameterizedTest
    @org.junit.jupiter.params.provider.CsvSource({"shm, 0", "shm, 2000", "tcp, 0", "tcp, 2000"})
    void progressThreadsThatSleepAtOnceOrPollLongDeliverEverythingInOrder(String provider, long idlePollMicros)
            throws Exception {
        TransportConfig config = config(provider).withIdlePollMicros(idlePollMicros);
        Recorder received = new Recorder();
        Transport server = open(config, received);
        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        for (int round = 0; round < 5; round++) {
            received.seen.clear();
            sendAll(peer, 4, 100);
            assertTrue(waitFor(() -> received.count() == 400, 10_000), "round " + round + ": " + received.count());
            received.assertInOrder(4, 100);
            Thread.sleep(30); // long enough for both progress threads to fall asleep
        }
        assertEquals(0, client.counters().bytesInFlight());
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void peersWithDifferentEagerThresholdsSendEagerlyUpToTheSmaller(String provider) throws Exception {
        TransportConfig base = config(provider);
        TransportConfig small = base.withFlowControl(4096, base.receiveBuffersPerLink(), base.sendWindowBytesPerLink(),
                base.sendWindowBytesPerPeer(), base.sendWindowBytesPerProcess());
        TransportConfig large = base.withFlowControl(64 << 10, base.receiveBuffersPerLink(),
                base.sendWindowBytesPerLink(), base.sendWindowBytesPerPeer(), base.sendWindowBytesPerProcess());
        int count = 40;
        List<Integer> sizes = new CopyOnWriteArrayList<>();
        CountDownLatch all = new CountDownLatch(2 * count);
        MessageHandler record = (from, message) -> {
            long size = message.segment().byteSize();
            for (long i = 0; i < size; i++) {
                assertEquals((byte) (size + i), message.segment().get(ValueLayout.JAVA_BYTE, i), "byte " + i);
            }
            sizes.add((int) size);
            message.release();
            all.countDown();
        };
        Transport smallSide = open(small, record);
        Transport largeSide = open(large, record);
        // 32 KiB fits the large side's receive buffers, not the small side's: both ways it must
        // go by rendezvous, and 2 KiB eagerly.
        for (Peer peer : List.of(largeSide.connect(smallSide.localAddress()), smallSide.connect(largeSide.localAddress()))) {
            List<CompletableFuture<Void>> futures = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                int size = i % 2 == 0 ? 2048 : 32 << 10;
                OutboundMessage m = peer.allocate(size);
                for (int b = 0; b < size; b++) {
                    m.segment().set(ValueLayout.JAVA_BYTE, b, (byte) (size + b));
                }
                futures.add(peer.send(0, m));
            }
            for (CompletableFuture<Void> f : futures) {
                f.get(20, TimeUnit.SECONDS);
            }
        }
        assertTrue(all.await(20, TimeUnit.SECONDS), "delivered " + sizes.size() + " of " + 2 * count);
        for (Transport t : List.of(smallSide, largeSide)) {
            assertEquals(count / 2, t.counters().eagerSent(), "eager sends");
            assertEquals(count / 2, t.counters().rendezvousSent(), "rendezvous sends");
            assertEquals(0, t.counters().linkFailures());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aLargeTransferDoesNotHoldBackSmallMessagesOnTheSameLink(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withLinks(1, 64)
                .withPools(128L << 20, 32L << 20, 128L << 20);
        int large = 32 << 20;
        // Fewer small messages than the first grant of credits (32 on shm's shared queue, and on
        // tcp's shared receive context of 1,024 buffers from this pool): what is measured is the
        // send window, not a wait for credits.
        int small = 20;
        // Valid only if the small ones were posted while the large one was still on its way: a
        // sending thread descheduled for longer than the whole transfer (a loaded host) posts
        // them behind it, which says nothing of the link. Such an attempt is repeated.
        for (int attempt = 1; ; attempt++) {
            List<Integer> order = new CopyOnWriteArrayList<>();
            CountDownLatch all = new CountDownLatch(small + 1);
            Transport server = open(config, (from, message) -> {
                order.add((int) message.segment().byteSize());
                message.release();
                all.countDown();
            });
            Transport client = open(config, (from, m) -> m.release());
            Peer peer = client.connect(server.localAddress());
            List<CompletableFuture<Void>> futures = new ArrayList<>();
            futures.add(peer.send(0, peer.allocate(large)));
            for (int i = 1; i <= small; i++) {
                futures.add(peer.send(i, peer.allocate(100 + i)));
            }
            // On its way, and not yet being pulled: the server had posted no read. Over one TCP
            // socket (tcp's connected endpoints), what is sent once the pull's data streams back
            // lands behind it on the wire, which says nothing of the transport's own queues.
            // Posted means posted to libfabric (a send handed to the progress thread is posted a
            // moment later): once all are, the server must not have posted a read yet.
            long postedBy = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
            while (client.counters().eagerSent() < small && System.nanoTime() < postedBy) {
                Thread.onSpinWait();
            }
            boolean allPosted = client.counters().eagerSent() >= small;
            boolean postedInFlight = allPosted && ((FabricTransport) server).pulls.readsPosted() == 0
                    && !futures.get(0).isDone() && !order.contains(large);
            assertTrue(all.await(30, TimeUnit.SECONDS), "delivered " + order.size() + " of " + (small + 1));
            for (CompletableFuture<Void> f : futures) {
                f.get(10, TimeUnit.SECONDS);
            }
            assertEquals(0, client.counters().bytesInFlight());
            if (!postedInFlight && attempt < 20) {
                client.close();
                server.close();
                continue;
            }
            assertTrue(postedInFlight, "in 20 attempts the large transfer was pulled before the small ones were posted");
            System.out.println(provider + ": a valid attempt after " + attempt);
            int largeAt = order.indexOf(large);
            assertEquals(small, largeAt, "the small messages on the same link waited for the large one: " + order);
            return;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void heartbeatsKeepAnIdlePeerAlive(String provider) throws Exception {
        TransportConfig config = config(provider).withHeartbeat(50, 300);
        CountDownLatch lost = new CountDownLatch(1);
        Transport server = open(config, closedLatch(lost));
        Transport client = open(config, closedLatch(lost));
        Peer peer = client.connect(server.localAddress());
        assertFalse(lost.await(1_500, TimeUnit.MILLISECONDS), "an idle but live peer was declared failed");
        assertTrue(peer.isOpen());
        sendAll(peer, 1, 1);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aPeerThatStopsItsHeartbeatsIsDeclaredFailed(String provider) throws Exception {
        TransportConfig config = config(provider).withHeartbeat(50, 300);
        CopyOnWriteArrayList<Throwable> causes = new CopyOnWriteArrayList<>();
        CountDownLatch lost = new CountDownLatch(1);
        Transport server = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }
        });
        Transport client = open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer p, Throwable cause) {
                causes.add(cause);
                lost.countDown();
            }
        });
        Peer peer = client.connect(server.localAddress());
        sendAll(peer, 1, 1);
        // The server hangs, as far as its control channel tells: its data path still works.
        ((FabricTransport) server).pauseHeartbeats(true);
        assertTrue(lost.await(20, TimeUnit.SECONDS), "a silent peer was not declared failed");
        assertTrue(causes.getFirst().getMessage().contains("no heartbeat"), causes.getFirst().getMessage());
        assertFalse(peer.isOpen());
        TransportException refused = assertThrows(TransportException.class, () -> peer.allocate(8));
        assertTrue(refused.getMessage().contains("failed"), refused.getMessage());
        ((FabricTransport) server).pauseHeartbeats(false);
        // Once it speaks again, a new connection works.
        Peer again = client.connect(server.localAddress());
        try {
            sendAll(again, 2, 5);
        } catch (ExecutionException e) {
            assertInstanceOf(TransportException.class, e.getCause());
            throw e;
        }
    }

    private static MessageHandler closedLatch(CountDownLatch latch) {
        return new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                latch.countDown();
            }
        };
    }
}
