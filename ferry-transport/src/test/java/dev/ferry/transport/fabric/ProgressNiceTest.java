package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.Peer;
import dev.ferry.transport.ProgressNice;
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
                seen[0] = niceOf(currentTid());
                seen[1] = ProgressNice.applyToCurrentThread(target) ? 1 : 0;
                seen[2] = niceOf(currentTid());
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        });
        t.join();
        assertEquals(1, seen[1], "refused");
        assertEquals(target, seen[2], "nice after the call (before: " + seen[0] + ")");
        // 0 leaves the thread alone: no call is made.
        int before = niceOf(currentTid());
        assertTrue(ProgressNice.applyToCurrentThread(0));
        assertEquals(before, niceOf(currentTid()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aTransportsProgressThreadRunsAtTheValueAskedAndStillDelivers(String provider) throws Exception {
        List<Long> before = tidsNamed("ferry-progress-");
        int ours = niceOf(currentTid());
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
        List<Long> mine = tidsNamed("ferry-progress-");
        mine.removeAll(before);
        assertEquals(2, mine.size(), "the two transports' progress threads: " + mine);
        for (long tid : mine) {
            assertEquals(target, niceOf(tid), "progress thread " + tid);
        }
        assertEquals(ours, niceOf(currentTid()), "the calling thread keeps its own");
    }

    @Test
    void aBadValueIsRefusedBeforeTheTransportOpensAnything() throws Exception {
        List<Long> before = tidsNamed("ferry-progress-");
        System.setProperty(ProgressNice.PROPERTY, "-40");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> open(TransportConfig.defaults("shm"), (from, m) -> m.release()));
        assertTrue(e.getMessage().contains(ProgressNice.PROPERTY), e.getMessage());
        assertEquals(before, tidsNamed("ferry-progress-"), "a progress thread was started");
        assertFalse(Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().startsWith("ferry-progress-") && !t.isDaemon()));
    }

    /**
     * A nice value above this thread's (a lower priority, which needs no privilege); the test is
     * skipped where this thread already runs at the lowest.
     */
    static int lowerPriorityThanOurs() throws IOException {
        int ours = niceOf(currentTid());
        org.junit.jupiter.api.Assumptions.assumeTrue(ours < 19, "this thread already runs at nice 19");
        return Math.min(19, ours + 5);
    }

    static long currentTid() throws IOException {
        return Long.parseLong(Path.of("/proc/thread-self").toRealPath().getFileName().toString());
    }

    /** The kernel's nice value of thread {@code tid} of this process: field 19 of its stat line. */
    static int niceOf(long tid) throws IOException {
        String stat = Files.readString(Path.of("/proc/self/task/" + tid + "/stat"));
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Integer.parseInt(fields[16]);
    }

    /** This process's threads whose name starts with {@code prefix}, by kernel thread id. */
    static List<Long> tidsNamed(String prefix) throws IOException {
        List<Long> tids = new ArrayList<>();
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            for (Path task : (Iterable<Path>) tasks::iterator) {
                try {
                    if (Files.readString(task.resolve("comm")).startsWith(prefix)) {
                        tids.add(Long.parseLong(task.getFileName().toString()));
                    }
                } catch (IOException gone) {
                    // the thread ended meanwhile
                }
            }
        }
        return tids;
    }
}
