package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * The data path allocates (almost) nothing per message in steady state: small messages sent with
 * {@link Peer#trySend} and released in the handler, measured with the thread allocation counters
 * of the sending thread and both progress threads after a warm-up.
 *
 * <p>What remains by design is the application's handle on each message, which keeps a stale
 * reference from reaching a pooled frame: 16 bytes per send ({@link SendClaim}) and 24 per
 * delivery ({@link ReceivedMessage}), plus the occasional payload view of a buffer that meets a
 * new frame. The bounds leave less headroom than any further object per message would take.
 */
class SteadyStateAllocationTest extends FabricTransportFixture {

    private static final int MESSAGES = 50_000;
    /** A 16-byte claim per message and a few re-cut payload views. */
    private static final double SENDING_BOUND = 32;
    /** A 24-byte handle per delivered message. */
    private static final double PROGRESS_BOUND = 40;
    /** The size, and threshold, of the messages sent by reference. */
    private static final int BY_REFERENCE = 16 * 1024;
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void smallMessagesAllocateNothingPerMessage(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 16L << 20);
        assertNothingPerMessage(provider, config, 64, false);
    }

    /**
     * Messages by reference ({@link TransportConfig#sharedSendBytes}): the sender's awaited
     * releases and the receiver's frames and views are reused, so that beyond the handles above
     * nothing is allocated per message either. The receive side owes each release and sends it
     * 32 at a time (no eager frame goes back here to carry them).
     */
    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void messagesByReferenceAllocateNothingPerMessage(String provider) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(dev.ferry.memory.SharedMemory.available(), "no memfd here");
        TransportConfig config = TransportConfig.defaults(provider).withPools(32L << 20, 16L << 20, 16L << 20)
                .withSharedSendBytes(BY_REFERENCE);
        assertNothingPerMessage(provider + " by reference", config, BY_REFERENCE, true);
    }

    /**
     * Streams {@link #MESSAGES} messages of {@code size} bytes twice (the first time to warm up:
     * pools filled, code compiled) and checks what the second time allocated per message on the
     * sending thread and both progress threads; {@code byReference}: every message went so.
     */
    private void assertNothingPerMessage(String label, TransportConfig config, int size, boolean byReference)
            throws Exception {
        AtomicLong received = new AtomicLong();
        Transport receiver = open(config, (from, message) -> {
            message.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, size - 8);
            message.release();
            received.incrementAndGet();
        });
        Transport sender = open(config, (from, message) -> message.release());
        Peer peer = sender.connect(receiver.localAddress());
        long senderProgress = progressThread(sender);
        long receiverProgress = progressThread(receiver);

        stream(peer, received, MESSAGES, size);
        long sending = THREADS.getCurrentThreadAllocatedBytes();
        long sendProgress = THREADS.getThreadAllocatedBytes(senderProgress);
        long receiveProgress = THREADS.getThreadAllocatedBytes(receiverProgress);
        long sharedBefore = ((FabricTransport) sender).counters.sharedSent.sum();
        stream(peer, received, MESSAGES, size);
        long shared = ((FabricTransport) sender).counters.sharedSent.sum() - sharedBefore;
        double perSending = (THREADS.getCurrentThreadAllocatedBytes() - sending) / (double) MESSAGES;
        double perSendProgress = (THREADS.getThreadAllocatedBytes(senderProgress) - sendProgress) / (double) MESSAGES;
        double perReceiveProgress = (THREADS.getThreadAllocatedBytes(receiverProgress) - receiveProgress)
                / (double) MESSAGES;

        String figures = String.format("%s: B/msg sending thread %.1f, sender's progress %.1f, receiver's progress %.1f;"
                + " %d of %d by reference", label, perSending, perSendProgress, perReceiveProgress, shared, MESSAGES);
        System.out.println(figures);
        assertEquals(byReference ? MESSAGES : 0, shared, figures);
        assertTrue(perSending < SENDING_BOUND && perSendProgress < PROGRESS_BOUND && perReceiveProgress < PROGRESS_BOUND, figures);
    }

    /** Sends {@code n} messages of {@code size} bytes with tryAllocate and trySend and waits until all arrived. */
    private static void stream(Peer peer, AtomicLong received, int n, int size) throws InterruptedException {
        long target = received.get() + n;
        for (int i = 0; i < n; i++) {
            OutboundMessage message;
            while ((message = peer.tryAllocate(size)) == null) {
                Thread.onSpinWait();
            }
            message.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, i);
            while (!peer.trySend(i & 7, message)) {
                Thread.onSpinWait();
            }
        }
        assertTrue(waitFor(() -> received.get() >= target, 30_000), "received " + received.get() + " of " + target);
    }

    private static long progressThread(Transport transport) {
        String name = "ferry-progress-" + transport.localAddress().substring(transport.localAddress().lastIndexOf(':') + 1);
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name)).findFirst()
                .orElseThrow().threadId();
    }
}
