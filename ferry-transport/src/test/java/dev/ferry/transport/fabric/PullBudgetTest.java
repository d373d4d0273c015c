package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Receiver-driven pacing: with a pull budget, a receiver that many senders push large messages to
 * at once pulls one message whole at a time, in two reads, starting the next once the reads of the
 * one before are down to half the budget; and every message still arrives whole, in its stream's
 * order, from every sender.
 */
class PullBudgetTest extends FabricTransportFixture {

    private static final int SENDERS = 6;
    private static final int PER_SENDER = 6;
    private static final int SIZE = (1 << 20) + 4099;

    @Test
    @Timeout(120)
    void pullsStayWithinTheBudgetAndEveryMessageArrivesInOrder() throws Exception {
        long budget = 192 * 1024;
        TransportConfig config = paced(budget);
        Map<String, int[]> next = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicInteger delivered = new AtomicInteger();
        Transport server = open(config, (from, message) -> {
            try {
                int[] seq = next.computeIfAbsent(from.address() + "/" + message.stream(), k -> new int[1]);
                String problem = check(message.segment(), from.address().hashCode(), message.stream(), seq[0]++);
                if (problem != null) {
                    errors.add(from.address() + ": " + problem);
                }
            } finally {
                message.release();
                delivered.incrementAndGet();
            }
        });
        List<Thread> senders = new ArrayList<>();
        ConcurrentLinkedQueue<CompletableFuture<Void>> futures = new ConcurrentLinkedQueue<>();
        for (int s = 0; s < SENDERS; s++) {
            Transport client = open(config, (from, message) -> message.release());
            Peer peer = client.connect(server.localAddress());
            int seed = client.localAddress().hashCode();
            senders.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < PER_SENDER; i++) {
                    int stream = i % 2;
                    OutboundMessage m = peer.allocate(SIZE);
                    fill(m.segment(), seed, stream, i / 2);
                    futures.add(peer.send(stream, m));
                }
            }));
        }
        for (Thread t : senders) {
            t.join();
        }
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> delivered.get() == SENDERS * PER_SENDER, 60_000), "delivered " + delivered.get());
        assertTrue(errors.isEmpty(), String.join("\n", errors));
        assertEquals(SENDERS * 2, next.size());
        RendezvousPuller pulls = ((FabricTransport) server).pulls;
        // Each message pulled whole, in two reads, once the others' reads were down to half the budget.
        assertEquals(2L * SENDERS * PER_SENDER, pulls.readsPosted());
        long overlap = pulls.peakOverlapBytes();
        assertTrue(overlap > 0 && overlap <= budget / 2, "other messages' reads in flight when one was pulled whole peaked at "
                + overlap + " bytes, budget " + budget);
        long shared = pulls.peakSharedBytesInFlight();
        assertTrue(shared <= budget, "reads of several messages in flight peaked at " + shared + " bytes, budget " + budget);
        long peak = pulls.peakBytesInFlight();
        assertTrue(peak > SIZE && peak <= SIZE + budget / 2, "reads in flight peaked at " + peak
                + " bytes: more than one message and half the budget, or never two messages at once");
        assertEquals(SENDERS * PER_SENDER, server.counters().messagesReceived());
    }

    @Test
    @Timeout(120)
    void aMessageAloneOnTheWireIsPulledInTwoReads() throws Exception {
        long budget = 192 * 1024;
        TransportConfig config = paced(budget);
        List<String> errors = new ArrayList<>();
        AtomicInteger delivered = new AtomicInteger();
        Transport server = open(config, (from, message) -> {
            try {
                String problem = check(message.segment(), 7, message.stream(), delivered.get());
                if (problem != null) {
                    synchronized (errors) {
                        errors.add(problem);
                    }
                }
            } finally {
                message.release();
                delivered.incrementAndGet();
            }
        });
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        RendezvousPuller pulls = ((FabricTransport) server).pulls;
        for (int i = 0; i < 3; i++) {
            OutboundMessage m = peer.allocate(SIZE);
            fill(m.segment(), 7, 0, i);
            peer.send(0, m).get(30, TimeUnit.SECONDS);
            int expected = i + 1;
            assertTrue(waitFor(() -> delivered.get() == expected, 30_000), "delivered " + delivered.get());
            // All but the last half-budget in one read, then that last part: two reads per message.
            assertEquals(2L * expected, pulls.readsPosted());
        }
        assertTrue(errors.isEmpty(), String.join("\n", errors));
        assertEquals(SIZE, pulls.peakBytesInFlight());
        assertEquals(0, pulls.peakSharedBytesInFlight());
    }

    @Test
    @Timeout(120)
    void withoutABudgetReadsGoAsBefore() throws Exception {
        TransportConfig config = TransportConfig.defaults("tcp").withPools(32L << 20, 32L << 20, 64L << 20);
        AtomicInteger delivered = new AtomicInteger();
        Transport server = open(config, (from, message) -> {
            message.release();
            delivered.incrementAndGet();
        });
        Transport client = open(config, (from, message) -> message.release());
        Peer peer = client.connect(server.localAddress());
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            OutboundMessage m = peer.allocate(4 << 20);
            futures.add(peer.send(i, m));
        }
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> delivered.get() == 4, 60_000));
        // 1 MiB chunks, several at once: the budget is off.
        assertTrue(((FabricTransport) server).pulls.peakBytesInFlight() >= 2L << 20);
    }

    /**
     * A sender closed while its large messages are being pulled under a budget: its pulls are
     * dropped (the shortest-first choice must skip a failed peer's message, not stall on it), the
     * other sender's messages all arrive whole and in order, and the rendezvous pool is empty again.
     * Each of the closed sender's messages holds the server's progress thread for 20 ms as it
     * arrives, so that its 24 MiB cannot all be pulled between the first pull and the close: on a
     * warm loopback they once were, and nothing died mid-pull.
     */
    @Test
    @Timeout(120)
    void aSenderThatDiesMidPullDoesNotStallTheOthers() throws Exception {
        long budget = 192 * 1024;
        TransportConfig config = paced(budget);
        Map<String, int[]> next = new ConcurrentHashMap<>();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicInteger fromSurvivor = new AtomicInteger();
        AtomicInteger fromDoomed = new AtomicInteger();
        Transport[] clients = new Transport[2];
        Transport server = open(config, (from, message) -> {
            try {
                if (from.address().equals(clients[1].localAddress())) {
                    int[] seq = next.computeIfAbsent(from.address(), k -> new int[1]);
                    String problem = check(message.segment(), from.address().hashCode(), 0, seq[0]++);
                    if (problem != null) {
                        errors.add(problem);
                    }
                    fromSurvivor.incrementAndGet();
                } else {
                    fromDoomed.incrementAndGet();
                    Thread.sleep(20);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                message.release();
            }
        });
        clients[0] = open(config, (from, message) -> message.release());
        clients[1] = open(config, (from, message) -> message.release());
        Peer doomed = clients[0].connect(server.localAddress());
        Peer survivor = clients[1].connect(server.localAddress());
        int doomedSent = 24;
        for (int i = 0; i < doomedSent; i++) {
            doomed.send(0, doomed.allocate(SIZE)); // outcomes do not matter: the sender dies
        }
        assertTrue(waitFor(() -> ((FabricTransport) server).pulls.peakBytesInFlight() > 0, 30_000), "nothing pulled");
        clients[0].close();
        List<CompletableFuture<Void>> futures = new ArrayList<>();
        int seed = clients[1].localAddress().hashCode();
        for (int i = 0; i < PER_SENDER; i++) {
            OutboundMessage m = survivor.allocate(SIZE);
            fill(m.segment(), seed, 0, i);
            futures.add(survivor.send(0, m));
        }
        CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> fromSurvivor.get() == PER_SENDER, 60_000), "delivered " + fromSurvivor.get());
        assertTrue(errors.isEmpty(), String.join("\n", errors));
        assertTrue(waitFor(() -> server.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS).buffersInUse() == 0,
                30_000), "rendezvous buffers left: " + server.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS));
        assertTrue(((FabricTransport) server).pulls.peakSharedBytesInFlight() <= budget);
        assertTrue(fromDoomed.get() < doomedSent, "the dead sender's messages all arrived: nothing died mid-pull");
    }

    private static long mix(long a, long b, long c) {
        long z = a * 0x9E3779B97F4A7C15L + b * 0xC2B2AE3D27D4EB4FL + c * 0x165667B19E3779F9L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        return z ^ (z >>> 31);
    }

    /** tcp with pools for a few dozen 1 MiB messages and a pull budget of {@code budget} bytes. */
    private static TransportConfig paced(long budget) {
        return TransportConfig.defaults("tcp").withPools(32L << 20, 32L << 20, 64L << 20).withPullBudgetBytes(budget);
    }

    private static void fill(MemorySegment segment, int seed, int stream, int seq) {
        long words = segment.byteSize() / 8;
        for (long k = 0; k < words; k++) {
            segment.set(ValueLayout.JAVA_LONG_UNALIGNED, k * 8, mix(seed, stream * 1_000_003L + seq, k));
        }
    }

    private static String check(MemorySegment segment, int seed, int stream, int seq) {
        if (segment.byteSize() != SIZE) {
            return "stream " + stream + " message " + seq + ": " + segment.byteSize() + " bytes";
        }
        long words = segment.byteSize() / 8;
        for (long k = 0; k < words; k++) {
            if (segment.get(ValueLayout.JAVA_LONG_UNALIGNED, k * 8) != mix(seed, stream * 1_000_003L + seq, k)) {
                return "stream " + stream + " message " + seq + ": wrong bytes at " + k * 8 + " (out of order?)";
            }
        }
        return null;
    }
}
