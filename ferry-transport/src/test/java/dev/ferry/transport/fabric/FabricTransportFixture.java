package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/**
 * Transports a test opens, closed after it; waiting for a condition with a bound; and the
 * numbered message bodies tests send and check byte for byte.
 */
abstract class FabricTransportFixture {

    private final List<Transport> opened = new CopyOnWriteArrayList<>();

    /**
     * A thread left interrupted by one test makes the next one's first wait fail at once (seen
     * once in a dozen runs of the module: "interrupted while waiting for the progress thread" in
     * a connect right at a test's start). Each test starts with the flag clear, and where it was
     * set is printed: by the test body, or by the close of which transport.
     */
    @BeforeEach
    void startUninterrupted(TestInfo test) {
        if (Thread.interrupted()) {
            System.out.println("ferry-test: " + test.getDisplayName() + " started on an interrupted thread (cleared)");
        }
    }

    @AfterEach
    void closeTransports(TestInfo test) {
        if (Thread.currentThread().isInterrupted()) {
            System.out.println("ferry-test: " + test.getDisplayName() + " left its thread interrupted");
        }
        for (int i = 0; i < opened.size(); i++) {
            boolean before = Thread.currentThread().isInterrupted();
            opened.get(i).close();
            if (!before && Thread.currentThread().isInterrupted()) {
                System.out.println("ferry-test: closing transport " + i + " of " + test.getDisplayName()
                        + " (in the order opened) left the thread interrupted");
            }
        }
    }

    /** Opens a transport that is closed after the test. */
    protected Transport open(TransportConfig config, MessageHandler handler) {
        Transport t = Transports.open(config, handler);
        opened.add(t);
        return t;
    }

    /** Opens a transport that ignores the host's CPU pressure ({@link CpuPressure}), so that its callers poll. */
    static Transport spinning(java.util.function.Supplier<Transport> opener) {
        synchronized (FabricTransportFixture.class) {
            String was = System.setProperty("ferry.transport.spinUnderLoad", "true");
            try {
                return opener.get();
            } finally {
                if (was == null) {
                    System.clearProperty("ferry.transport.spinUnderLoad");
                } else {
                    System.setProperty("ferry.transport.spinUnderLoad", was);
                }
            }
        }
    }

    /** Polls {@code condition} until it holds (true) or {@code millis} pass (false). */
    static boolean waitFor(BooleanSupplier condition, long millis) throws InterruptedException {
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
     * Closes a transport from a thread of its own when told to, and tells the teller when that
     * thread is about to close it: what the teller does next races the close however fast it
     * runs. Join {@link #thread} at the end.
     */
    static final class Closer {

        private final CountDownLatch go = new CountDownLatch(1);
        private final CountDownLatch closing = new CountDownLatch(1);
        final Thread thread;

        Closer(Transport transport) {
            thread = Thread.ofPlatform().start(() -> {
                try {
                    go.await(30, TimeUnit.SECONDS); // closes anyway if never told
                } catch (InterruptedException e) {
                    return;
                }
                closing.countDown();
                transport.close();
            });
        }

        /** Starts the close and returns once the closing thread is about to call it. */
        void closeNow() throws InterruptedException {
            go.countDown();
            closing.await();
        }
    }

    /** Writes message {@code seq} of {@code stream}: its number, then bytes derived from both. */
    static void fill(MemorySegment body, int stream, long seq) {
        body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        for (long i = 8; i < body.byteSize(); i++) {
            body.set(ValueLayout.JAVA_BYTE, i, (byte) (stream * 131 + seq * 7 + i));
        }
    }

    /** Null if {@code body} is what {@link #fill} wrote for {@code stream} and {@code seq}; else what differs. */
    static String check(MemorySegment body, int stream, long seq) {
        for (long i = 8; i < body.byteSize(); i++) {
            if (body.get(ValueLayout.JAVA_BYTE, i) != (byte) (stream * 131 + seq * 7 + i)) {
                return "stream " + stream + " message " + seq + ": byte " + i + " of " + body.byteSize() + " is wrong";
            }
        }
        return null;
    }

    /** Sends message {@code seq} of {@code size} bytes on stream 0, {@link #fill filled}. */
    static java.util.concurrent.CompletableFuture<Void> sendSeq(dev.ferry.transport.Peer peer, long seq, int size) {
        dev.ferry.transport.OutboundMessage message = peer.allocate(size);
        fill(message.segment(), 0, seq);
        return peer.send(0, message);
    }

    /** Send buffers {@code transport} has handed out and not got back (its control frames' included). */
    static long sendPoolBuffers(Transport transport) {
        return transport.allocatorStats().orElseThrow().pool(dev.ferry.memory.PoolKind.SEND).buffersInUse();
    }
}
