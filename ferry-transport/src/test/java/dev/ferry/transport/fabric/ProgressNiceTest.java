package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.Peer;
import dev.ferry.transport.ProgressNice;
import dev.ferry.transport.TaskStat;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * The progress thread's scheduler priority ({@link ProgressNice}): read back from the kernel
 * ({@code /proc/self/task/<tid>/stat}), not from the call's return value. They ask for a lower
 * priority than the test's own, which needs no privilege, so they run anywhere Linux does.
 */
@Timeout(60)
class ProgressNiceTest extends FabricTransportFixture {

    @AfterEach
    void clearProperty() {
        System.clearProperty(ProgressNice.PROPERTY);
    }

    @Test
    void theRequestedValueIsReadAndCheckedWithAReason() {
        assertEquals(0, ProgressNice.requested(), "unset");
        System.setProperty(ProgressNice.PROPERTY, " -7 ");
        assertEquals(-7, ProgressNice.requested());
        for (String bad : new String[] {"-21", "20", "high", "1.5"}) {
            System.setProperty(ProgressNice.PROPERTY, bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, ProgressNice::requested, bad);
            assertTrue(e.getMessage().contains(ProgressNice.PROPERTY) && e.getMessage().contains("-20 to 19"),
                    e.getMessage());
        }
    }

    @Test
    void aThreadAsksAndTheKernelSetsIt() throws Exception {
        int target = lowerPriorityThanOurs();
        int[] seen = new int[3];
        Thread t = Thread.ofPlatform().start(() -> {
            try {
                seen[0] = TaskStat.niceOf(TaskStat.currentTid());
                seen[1] = ProgressNice.applyToCurrentThread(target) ? 1 : 0;
                seen[2] = TaskStat.niceOf(TaskStat.currentTid());
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        t.join();
        assertEquals(1, seen[1], "refused");
        assertEquals(target, seen[2], "nice after the call (before: " + seen[0] + ")");
        // 0 leaves the thread alone: no call is made.
        int before = TaskStat.niceOf(TaskStat.currentTid());
        assertTrue(ProgressNice.applyToCurrentThread(0));
        assertEquals(before, TaskStat.niceOf(TaskStat.currentTid()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aTransportsProgressThreadRunsAtTheValueAskedAndStillDelivers(String provider) throws Exception {
        List<Long> before = TaskStat.tidsNamed("ferry-progress-");
        int ours = TaskStat.niceOf(TaskStat.currentTid());
        int target = lowerPriorityThanOurs();
        System.setProperty(ProgressNice.PROPERTY, Integer.toString(target));
        TransportConfig config = TransportConfig.defaults(provider);
        AtomicInteger received = new AtomicInteger();
        Transport server = open(config, (from, m) -> {
            received.incrementAndGet();
            m.release();
        });
        Transport client = open(config, (from, m) -> m.release());
        System.clearProperty(ProgressNice.PROPERTY);
        Peer peer = client.connect(server.localAddress());
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            sends.add(sendSeq(peer, i, 64));
        }
        for (CompletableFuture<Void> f : sends) {
            f.get(20, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> received.get() == 100, 10_000), "delivered " + received.get() + " of 100");
        List<Long> mine = TaskStat.tidsNamed("ferry-progress-");
        mine.removeAll(before);
        assertEquals(2, mine.size(), "the two transports' progress threads: " + mine);
        for (long tid : mine) {
            assertEquals(target, TaskStat.niceOf(tid), "progress thread " + tid);
        }
        assertEquals(ours, TaskStat.niceOf(TaskStat.currentTid()), "the calling thread keeps its own");
    }

    @Test
    void aBadValueIsRefusedBeforeTheTransportOpensAnything() throws Exception {
        List<Long> before = TaskStat.tidsNamed("ferry-progress-");
        System.setProperty(ProgressNice.PROPERTY, "-40");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> open(TransportConfig.defaults("shm"), (from, m) -> m.release()));
        assertTrue(e.getMessage().contains(ProgressNice.PROPERTY), e.getMessage());
        assertEquals(before, TaskStat.tidsNamed("ferry-progress-"), "a progress thread was started");
    }

    /**
     * A nice value above this thread's (a lower priority, which needs no privilege); the test is
     * skipped where this thread already runs at the lowest.
     */
    static int lowerPriorityThanOurs() throws IOException {
        int ours = TaskStat.niceOf(TaskStat.currentTid());
        org.junit.jupiter.api.Assumptions.assumeTrue(ours < 19, "this thread already runs at nice 19");
        return Math.min(19, ours + 5);
    }
}
