package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

/** The record of changed rows behind the live export: ticks, ranges, pages, slots, forgetting. */
class ExportLogTest {

    private static final int DIM = 4;
    private static final long PUSHED = 100_000;

    private static void push(ParameterServer ps, long... ids) {
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, 1f);
        ps.push("t", DIM, ids, 0, ids.length, MemorySegment.ofArray(g));
    }

    private static long[] all(ExportLog log, long since, long upTo) {
        return log.changed("t", since, upTo, 0, true, slot -> true, Integer.MAX_VALUE - 1);
    }

    @Test
    void aSealSeparatesTheChangesBeforeItFromThoseAfter() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            push(ps, 5, 3, 9);
            ExportLog log = new ExportLog(ps);
            assertFalse(log.records("t"), "nothing recorded before the first seal");
            long first = log.seal();
            assertEquals(1, first);
            // Rows stored before the first seal are all in it.
            assertArrayEquals(new long[] {3, 5, 9}, all(log, 0, first));
            push(ps, 9, 11);
            push(ps, 11);
            long second = log.seal();
            assertEquals(2, second);
            assertArrayEquals(new long[] {9, 11}, all(log, first, second));
            assertArrayEquals(new long[] {3, 5, 9, 11}, all(log, 0, second));
            // Nothing changed: an empty range.
            long third = log.seal();
            assertArrayEquals(new long[0], all(log, second, third));
            // A change after the last seal is in no sealed range yet.
            push(ps, 3);
            assertArrayEquals(new long[0], all(log, third, third));
            assertArrayEquals(new long[] {3}, all(log, third, log.seal()));
            assertNotEquals(0, log.id());
        }
    }

    @Test
    void mergedRowsAreRecordedAndTablesArePickedUpByTheNextSeal() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults());
                ParameterServer other = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            ExportLog log = new ExportLog(ps);
            long s1 = log.seal();
            SparseTable u = ps.createTable(TableConfig.of("u", DIM, Optimizer.sgd(1)));
            assertFalse(log.records("u"));
            // Rows merged in (a move, a replica) count as changes.
            other.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            push(other, 42, 43);
            try (Arena arena = Arena.ofConfined()) {
                SparseTable src = other.table("t");
                MemorySegment rows = arena.allocate(2 * RowTransfer.rowBytes(src), 8);
                RowTransfer.copy(src, new long[] {42, 43}, 2, rows);
                RowTransfer.merge(ps.table("t"), rows);
            }
            float[] g = new float[DIM];
            u.apply(new long[] {7}, 0, 1, MemorySegment.ofArray(g));
            long s2 = log.seal();
            assertTrue(log.records("u"));
            assertArrayEquals(new long[] {42, 43}, all(log, s1, s2));
            assertArrayEquals(new long[] {7}, log.changed("u", s1, s2, 0, true, slot -> true, 10));
        }
    }

    @Test
    void pagesCoverTheRangeOnceInIdOrderAndSlotsFilter() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            ExportLog log = new ExportLog(ps);
            log.seal();
            SplittableRandom random = new SplittableRandom(3);
            TreeSet<Long> expected = new TreeSet<>();
            for (int i = 0; i < 3_000; i++) {
                long id = random.nextLong();
                expected.add(id);
                push(ps, id);
            }
            long upTo = log.seal();
            List<Long> paged = new ArrayList<>();
            long after = 0;
            boolean first = true;
            while (true) {
                long[] page = log.changed("t", 1, upTo, after, first, slot -> true, 128);
                int n = Math.min(page.length, 128);
                for (int i = 0; i < n; i++) {
                    paged.add(page[i]);
                }
                if (page.length <= 128) {
                    break;
                }
                after = page[n - 1];
                first = false;
            }
            assertEquals(new ArrayList<>(expected), paged);
            long[] even = log.changed("t", 1, upTo, 0, true, slot -> slot % 2 == 0, 10_000);
            long wanted = expected.stream().filter(id -> Slots.slotOf(id) % 2 == 0).count();
            assertEquals(wanted, even.length);
            for (long id : even) {
                assertEquals(0, Slots.slotOf(id) % 2);
            }
        }
    }

    @Test
    void forgettingDropsOnlyStampsUpToTheTickAndKeepsTheRestFindable() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            ExportLog log = new ExportLog(ps);
            log.seal();
            SplittableRandom random = new SplittableRandom(11);
            TreeSet<Long> model = new TreeSet<>();
            for (int round = 0; round < 20; round++) {
                for (int i = 0; i < 500; i++) {
                    long id = random.nextLong(0, 4_000);
                    push(ps, id);
                    model.add(id);
                }
                long upTo = log.seal();
                // Forget a random third; stamps of rows changed after the tick stay.
                List<Long> ids = new ArrayList<>(model);
                for (long id : ids) {
                    if (random.nextInt(3) == 0) {
                        log.forget("t", id, upTo);
                        model.remove(id);
                    }
                }
                long later = random.nextLong(0, 4_000);
                push(ps, later);
                model.add(later);
                log.forget("t", later, upTo); // stamped after upTo: kept
                long next = log.seal();
                long[] left = all(log, 0, next);
                assertArrayEquals(model.stream().mapToLong(Long::longValue).toArray(), left, "round " + round);
            }
            assertEquals(model.size(), log.entries());
            assertTrue(log.bytes() >= 16L * model.size());
        }
    }

    @Test
    void noChangeFallsBetweenTwoSealsUnderConcurrentPushes() throws Exception {
        // Every push is followed by its id's presence in some sealed range, whatever the interleaving.
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            ExportLog log = new ExportLog(ps);
            long since = log.seal();
            AtomicLong next = new AtomicLong(1);
            java.util.concurrent.ConcurrentLinkedQueue<Throwable> failures = new java.util.concurrent.ConcurrentLinkedQueue<>();
            List<Thread> pushers = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                pushers.add(Thread.ofPlatform().start(() -> {
                    try {
                        for (long id = next.getAndIncrement(); id <= PUSHED; id = next.getAndIncrement()) {
                            push(ps, id);
                        }
                    } catch (RuntimeException e) {
                        failures.add(e);
                    }
                }));
            }
            TreeSet<Long> seen = new TreeSet<>();
            int seals = 0;
            while (pushers.stream().anyMatch(Thread::isAlive)) {
                long upTo = log.seal();
                seals++;
                for (long id : all(log, since, upTo)) {
                    seen.add(id);
                }
                since = upTo;
            }
            for (Thread t : pushers) {
                t.join();
            }
            long upTo = log.seal();
            for (long id : all(log, since, upTo)) {
                seen.add(id);
            }
            assertTrue(failures.isEmpty(), () -> "pushes failed: " + failures);
            assertTrue(seals > 1, "seals while pushing: " + seals);
            long pushed = PUSHED;
            assertEquals(pushed, seen.size(), "every pushed id once in some range");
            assertEquals(1L, seen.first());
            assertEquals(pushed, seen.last());
        }
    }
}
