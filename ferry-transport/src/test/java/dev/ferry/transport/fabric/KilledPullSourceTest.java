package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.Transports;

/**
 * A sender process killed with SIGKILL while the receiver pulls its message alone on the wire
 * (under a pull budget, so in large reads): the receiver sees the sender fail, its reads of the
 * message end, the part pulled is never delivered, the rendezvous buffer goes back to its pool,
 * and the next sender's large message is pulled and delivered whole.
 *
 * <p>To land the kill while a read is outstanding, the sender is first stopped (SIGSTOP) right
 * after the receiver posted the first read of one of its messages: on tcp the sender's provider
 * serves a read in the sender's own progress, so a stopped sender answers none and the read
 * stays outstanding until the kill. tcp only (shm and verbs read without the sender's CPU).
 */
class KilledPullSourceTest {

    private static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    private static final long BOUND_SECONDS = 60;
    private static final long BUDGET = 192 * 1024;
    /** The size of the message the next sender sends after the kill. */
    private static final int AFTER_BYTES = (4 << 20) + 4099;

    private final List<Transport> opened = new CopyOnWriteArrayList<>();
    private final List<Process> processes = new ArrayList<>();

    @AfterEach
    void cleanUp() throws InterruptedException {
        KilledPeerTest.stopAll(processes, opened);
    }

    @Test
    @Timeout(300)
    void aSenderKilledWhileItsMessageIsPulledAloneLeavesNothingBehind() throws Exception {
        String provider = System.getProperty("ferry.transport.provider", "tcp");
        Assumptions.assumeTrue(provider.equals("tcp"), "tcp only: there a stopped sender serves no read");
        TransportConfig config = KilledPeerTest.config(provider, HOST).withPullBudgetBytes(BUDGET);
        Receiver receiver = new Receiver();
        Transport survivor = open(config, receiver);
        RendezvousPuller pulls = ((FabricTransport) survivor).pulls;
        long readsPerMessage = readsAlone(KilledPeerChild.BULK_BYTES, config);
        Process process = KilledPeerTest.start(processes, provider, survivor.localAddress(), "bulk", null);
        long pid = process.pid();
        assertTrue(FabricTransportFixture.waitFor(() -> receiver.bulk.get() >= 1, BOUND_SECONDS * 1000),
                "no message of the sender arrived");

        // Stop the sender once the receiver posted the first read of its next message; once all
        // is quiet, a message is mid-pull exactly when more reads were posted than the messages
        // delivered took. Stopped between two messages, it goes on and the next one is tried.
        boolean midPull = false;
        int attempt = 0;
        for (; attempt < 10 && !midPull; attempt++) {
            assertTrue(FabricTransportFixture.waitFor(
                    () -> pulls.readsPosted() > readsPerMessage * receiver.bulk.get(), BOUND_SECONDS * 1000),
                    "the receiver posted no read of the sender's next message");
            signal(pid, "STOP");
            Thread.sleep(500);
            midPull = pulls.readsPosted() > readsPerMessage * receiver.bulk.get();
            if (!midPull) {
                signal(pid, "CONT");
            }
        }
        assertTrue(midPull, "the sender was never stopped while a message of it was being pulled");
        int deliveredAtKill = receiver.bulk.get();
        System.out.printf("[killed pull source] stopped on attempt %d with %d of %d reads of message %d posted%n",
                attempt, pulls.readsPosted() - readsPerMessage * deliveredAtKill, readsPerMessage, deliveredAtKill);
        ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly); // SIGKILL, by PID
        assertTrue(process.waitFor(30, TimeUnit.SECONDS), "the sender process " + pid + " did not die");

        assertTrue(receiver.senderFailed.await(BOUND_SECONDS, TimeUnit.SECONDS), "the receiver never saw the sender fail");
        assertInstanceOf(TransportException.class, receiver.cause.get());
        assertTrue(FabricTransportFixture.waitFor(
                () -> survivor.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS).buffersInUse() == 0,
                BOUND_SECONDS * 1000), "the pulled message's rendezvous buffer was not released: "
                        + survivor.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS));
        assertEquals(deliveredAtKill, receiver.bulk.get(), "a message of the killed sender was delivered after the kill");
        assertEquals(0, pulls.peakSharedBytesInFlight(), "a message was pulled in reads sharing the budget");
        assertTrue(pulls.peakOverlapBytes() <= BUDGET / 2, "a message was pulled whole beside "
                + pulls.peakOverlapBytes() + " bytes of another's reads");

        // The next sender's large message is pulled and delivered whole.
        long postedBefore = pulls.readsPosted();
        Transport next = open(config, (from, message) -> message.release());
        Peer peer = next.connect(survivor.localAddress());
        OutboundMessage message = peer.allocate(AFTER_BYTES);
        message.segment().fill((byte) 0x5A);
        peer.send(0, message).get(BOUND_SECONDS, TimeUnit.SECONDS);
        assertTrue(FabricTransportFixture.waitFor(() -> receiver.after.get() == 1, BOUND_SECONDS * 1000),
                "the next sender's message never arrived");
        assertEquals(readsAlone(AFTER_BYTES, config), pulls.readsPosted() - postedBefore);
        assertEquals(List.of(), receiver.errors);
        assertEquals(0, survivor.counters().receiveBuffersHeld(), "the receiver holds receive buffers");
    }

    /** The reads that pull a message of {@code bytes} alone on the wire under {@code config}'s budget. */
    private static long readsAlone(long bytes, TransportConfig config) {
        long chunkBytes = Math.max(1, Math.min(config.rendezvousChunkBytes(), config.pullBudgetBytes() / 2));
        long reads = 0;
        for (long left = bytes; left > 0; reads++) {
            left -= left > chunkBytes ? Math.min(config.rendezvousChunkBytes(), left - chunkBytes) : left;
        }
        return reads;
    }

    private static void signal(long pid, String name) throws Exception {
        Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).inheritIO().start();
        assertTrue(kill.waitFor(10, TimeUnit.SECONDS) && kill.exitValue() == 0, "kill -" + name + " " + pid + " failed");
    }

    private Transport open(TransportConfig config, MessageHandler handler) {
        Transport transport = Transports.open(config, handler);
        opened.add(transport);
        return transport;
    }

    /**
     * Counts the sender's whole messages (each filled with its sequence number's low byte) and
     * the next sender's; the first peer heard from is the sender, whose failure it records.
     */
    private static final class Receiver implements MessageHandler {
        final AtomicReference<Peer> sender = new AtomicReference<>();
        final AtomicInteger bulk = new AtomicInteger();
        final AtomicInteger after = new AtomicInteger();
        final List<String> errors = new CopyOnWriteArrayList<>();
        final AtomicReference<Throwable> cause = new AtomicReference<>();
        final CountDownLatch senderFailed = new CountDownLatch(1);

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            try {
                sender.compareAndSet(null, from);
                long size = message.segment().byteSize();
                byte expected;
                if (from == sender.get()) {
                    expected = (byte) bulk.get();
                    if (size != KilledPeerChild.BULK_BYTES) {
                        errors.add("the sender's message " + bulk.get() + " has " + size + " bytes");
                    }
                } else {
                    expected = 0x5A;
                    if (size != AFTER_BYTES) {
                        errors.add("the next sender's message has " + size + " bytes");
                    }
                }
                for (long at = 0; at < size; at++) {
                    if (message.segment().get(ValueLayout.JAVA_BYTE, at) != expected) {
                        errors.add("wrong byte at " + at + " of a message of " + size + " bytes");
                        break;
                    }
                }
                (from == sender.get() ? bulk : after).incrementAndGet();
            } finally {
                message.release();
            }
        }

        @Override
        public void onPeerClosed(Peer peer, Throwable cause) {
            if (peer == sender.get()) {
                this.cause.compareAndSet(null, cause);
                senderFailed.countDown();
            }
        }
    }
}
