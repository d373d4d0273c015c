package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ferry.transport.AbstractTransportTest;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.util.ResourceLeakDetector;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The behavioural suite on the Netty transport, with Netty's leak detector at paranoid. */
class NettyTransportTest extends AbstractTransportTest {

    /** Netty logs leaks through java.util.logging when nothing else is on the class path. */
    private static final Logger LEAK_LOGGER = Logger.getLogger(ResourceLeakDetector.class.getName());
    private static final List<String> LEAKS = new CopyOnWriteArrayList<>();

    @BeforeAll
    static void paranoidLeakDetection() {
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        LEAK_LOGGER.addHandler(new Handler() {
            @Override
            public void publish(LogRecord record) {
                if (record.getMessage() != null && record.getMessage().contains("LEAK")) {
                    LEAKS.add(record.getMessage());
                }
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        });
    }

    @Override
    protected TransportConfig config() {
        return TransportConfig.defaults(NettyTransportProvider.NAME);
    }

    /** Collects garbage, then allocates so the detector reports what it found. */
    @Override
    protected void assertNoLeaks() {
        for (int round = 0; round < 3; round++) {
            System.gc();
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            for (int i = 0; i < 64; i++) {
                ByteBuf probe = PooledByteBufAllocator.DEFAULT.directBuffer(64);
                probe.release();
            }
        }
        List<String> leaks = List.copyOf(LEAKS);
        LEAKS.clear();
        assertTrue(leaks.isEmpty(), () -> "Netty reported leaks:\n" + String.join("\n", leaks));
    }

    @Test
    @Timeout(60)
    void garbageOnOneConnectionClosesItAndSparesTheOthers() throws Exception {
        CountDownLatch goodArrived = new CountDownLatch(2);
        List<String> closedPeers = new CopyOnWriteArrayList<>();
        Transport server = open(config(), new MessageHandler() {
            @Override
            public void onMessage(Peer from, dev.ferry.transport.InboundMessage message) {
                message.release();
                goodArrived.countDown();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                closedPeers.add(peer.address());
            }
        });
        Transport good = open(config(), (from, message) -> message.release());
        Peer peer = good.connect(server.localAddress());
        peer.send(1, filled(peer, 1, 0, 100)).get(10, TimeUnit.SECONDS);

        String[] hostPort = server.localAddress().split(":");
        try (Socket raw = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
            raw.setSoTimeout(10_000);
            DataOutputStream out = new DataOutputStream(raw.getOutputStream());
            RawPeer.handshake(raw, "127.0.0.1:1", null);
            header(out, config().maxMessageSize() + 1, FrameDescriptor.TYPE_DATA, 5);
            out.flush();
            assertClosedByPeer(raw);
        }
        assertTrue(waitFor(() -> closedPeers.contains("127.0.0.1:1"), 10_000),
                "the handler was not told about the garbage peer: " + closedPeers);
        assertTrue(server.counters().linkFailures() >= 1);

        peer.send(1, filled(peer, 1, 1, 100)).get(10, TimeUnit.SECONDS);
        assertTrue(goodArrived.await(10, TimeUnit.SECONDS), "the good peer suffered from the bad one");
        assertTrue(peer.isOpen());
        assertEquals(List.of("127.0.0.1:1"), closedPeers);
    }

    /**
     * The receive side's lost-wakeup cases at once: messages larger than the link's byte limit,
     * each of which suspends reading; releases that come from another thread, after a delay, so
     * the resume must be scheduled onto the event loop; and small frames behind each large one,
     * which wait in the decoder while reading is off and must go up at the resume without any
     * new bytes from the socket. The stream must finish promptly, not on some later event.
     */
    @Test
    @Timeout(120)
    void largeMessagesReleasedLaterFromAnotherThreadKeepFlowing() throws Exception {
        TransportConfig config = config().withFlowControl(16 * 1024, 4, 4L << 20, 8L << 20, 64L << 20);
        int large = (1 << 20) + 4096;
        int small = 100;
        int rounds = 48;
        ScheduledExecutorService releaser = Executors.newSingleThreadScheduledExecutor();
        AtomicInteger arrived = new AtomicInteger();
        AtomicLong lastArrival = new AtomicLong(System.nanoTime());
        List<String> problems = new CopyOnWriteArrayList<>();
        // Streams 0 and 2 share link 0 of the two, so the small frames queue behind the large ones.
        int[] nextSeq = new int[3];
        try {
            Transport server = open(config, (from, message) -> {
                int stream = message.stream();
                int seq = nextSeq[stream]++;
                String problem = check(message.segment(), stream, seq, stream == 0 ? large : small);
                if (problem != null) {
                    problems.add(problem);
                }
                arrived.incrementAndGet();
                lastArrival.set(System.nanoTime());
                releaser.schedule(message::release, 10, TimeUnit.MILLISECONDS);
            });
            Transport client = open(config, (from, message) -> message.release());
            Peer peer = client.connect(server.localAddress());
            List<CompletableFuture<Void>> sends = new ArrayList<>();
            for (int i = 0; i < rounds; i++) {
                sends.add(peer.send(0, filled(peer, 0, i, large)));
                sends.add(peer.send(2, filled(peer, 2, i, small)));
            }
            long start = System.nanoTime();
            long longestGap = 0;
            while (arrived.get() < 2 * rounds && System.nanoTime() - start < TimeUnit.SECONDS.toNanos(60)) {
                Thread.sleep(10);
                longestGap = Math.max(longestGap, System.nanoTime() - lastArrival.get());
            }
            assertEquals(2 * rounds, arrived.get(), "messages stopped arriving; last one "
                    + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastArrival.get()) + " ms ago");
            CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
            assertTrue(problems.isEmpty(), () -> String.join("\n", problems));
            long gapMillis = TimeUnit.NANOSECONDS.toMillis(longestGap);
            // Generous for a loaded machine; a lost wake-up has no later event to end it here.
            assertTrue(gapMillis < 5_000, "the receiver sat idle for " + gapMillis + " ms with messages waiting");
            // Each large message suspends reading, unless its release beat the check (a busy machine).
            assertTrue(server.counters().creditStalls() >= rounds / 2,
                    () -> "the large messages did not suspend reading: " + server.counters());
            assertTrue(waitFor(() -> server.counters().receiveBuffersHeld() == 0, 5_000));
        } finally {
            releaser.shutdown();
            assertTrue(releaser.awaitTermination(10, TimeUnit.SECONDS));
        }
    }

    @Test
    @Timeout(30)
    void sendBuffersAreTheSegmentsTheApplicationWrote() {
        Transport transport = open(config(), (from, message) -> message.release());
        Peer peer = transport.connect(transport.localAddress());
        NettyOutboundMessage message = (NettyOutboundMessage) peer.allocate(100);
        for (int i = 0; i < 100; i++) {
            message.segment().set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) (i * 3));
        }
        message.truncate(60);
        message.claim();
        ByteBuf frame = message.frame(42);
        try {
            assertTrue(frame.isDirect());
            assertEquals(FrameDescriptor.HEADER_LENGTH + 60, frame.readableBytes());
            assertEquals(42, FrameDescriptor.stream(frame, 0));
            assertEquals(60, FrameDescriptor.payloadLength(frame, 0));
            for (int i = 0; i < 60; i++) {
                assertEquals((byte) (i * 3), frame.getByte(FrameDescriptor.HEADER_LENGTH + i), "byte " + i);
            }
        } finally {
            message.discard();
        }
    }

    private static void header(DataOutputStream out, int length, byte type, int stream) throws IOException {
        out.writeInt(length);
        out.writeByte(type);
        out.writeByte(FrameDescriptor.VERSION);
        out.writeShort(0);
        out.writeInt(stream);
    }

    private static void assertClosedByPeer(Socket socket) throws IOException {
        DataInputStream in = new DataInputStream(socket.getInputStream());
        try {
            int read = in.read();
            assertEquals(-1, read, "the transport answered garbage instead of closing");
        } catch (SocketException | EOFException e) {
            // A reset is a close too.
        }
    }
}
