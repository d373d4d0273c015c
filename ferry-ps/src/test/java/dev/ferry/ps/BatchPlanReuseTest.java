package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * One plan object re-planned for batches of every size, up and down, gives the answers of a plain
 * reference (maps and lists): the parts, their ids in first-appearance order, where each caller
 * position's row is, scattered rows and summed gradients bit for bit; and re-planning allocates
 * nothing once its arrays have grown.
 */
class BatchPlanReuseTest {

    private static final int DIMENSION = 19;

    @Test
    void aReplannedPlanAnswersLikeTheReference() {
        SplittableRandom random = new SplittableRandom(8);
        BatchPlan reused = new BatchPlan();
        int[] sizes = {0, 1, 2, 17, 4096, 3, 1000, 5000, 0, 64, 4097, 1};
        try (Arena arena = Arena.ofConfined()) {
            for (int servers : new int[] {1, 2, 3, 7}) {
                SlotTable slots = SlotTable.balanced(servers);
                for (int size : sizes) {
                    long[] ids = new long[size + 5];
                    long range = 1 + random.nextInt(Math.max(1, size));
                    for (int i = 0; i < ids.length; i++) {
                        ids[i] = random.nextLong(range) * 7919 - 100;
                    }
                    reused.plan(ids, 5, size, slots);
                    check(reused, ids, 5, size, slots, arena, random);
                    check(BatchPlan.of(ids, 5, size, slots), ids, 5, size, slots, arena, random);
                }
            }
        }
    }

    /**
     * Ids that share their entry in the plan's dedupe table (the last one, so that probes wrap
     * around), the extreme ids (0, -1, the smallest and largest long; an empty entry must not be
     * taken for id 0), each repeated in shuffled order: the same answers as the reference.
     */
    @Test
    void collidingAndExtremeIdsAnswerLikeTheReference() {
        int count = 4096;
        int capacity = 2 * count; // the dedupe table of a 4,096-id batch
        int shift = 64 - Integer.numberOfTrailingZeros(capacity);
        List<Long> distinct = new ArrayList<>(List.of(0L, -1L, Long.MIN_VALUE, Long.MAX_VALUE));
        for (long id = 1; distinct.size() < 64; id++) {
            if ((int) ((id * 0x9E3779B97F4A7C15L) >>> shift) == capacity - 1) {
                distinct.add(id);
            }
        }
        SplittableRandom random = new SplittableRandom(10);
        long[] ids = new long[count];
        for (int i = 0; i < count; i++) {
            ids[i] = distinct.get(random.nextInt(distinct.size()));
        }
        BatchPlan reused = new BatchPlan();
        try (Arena arena = Arena.ofConfined()) {
            for (int servers : new int[] {1, 2, 5}) {
                SlotTable slots = SlotTable.balanced(servers);
                reused.plan(ids, 0, count, slots);
                check(reused, ids, 0, count, slots, arena, random);
                assertEquals(distinct.size(), reused.uniqueCount());
                reused.plan(ids, 1, 7, slots); // a small batch after a large one: the table was cleared
                check(reused, ids, 1, 7, slots, arena, random);
            }
        }
    }

    @Test
    void aBadRangeLeavesAnEmptyPlan() {
        BatchPlan plan = new BatchPlan().plan(new long[] {1, 2, 3}, 0, 3, SlotTable.balanced(2));
        assertThrows(PsException.class, () -> plan.plan(new long[] {1}, 1, 1, SlotTable.balanced(2)));
        assertEquals(0, plan.parts());
        assertEquals(0, plan.count());
        assertEquals(PsException.Code.INVALID_ARGUMENT,
                assertThrows(PsException.class, () -> plan.partSize(0)).code());
    }

    @Test
    void replanningAllocatesNothingOnceGrown() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        SlotTable slots = SlotTable.balanced(2);
        SplittableRandom random = new SplittableRandom(9);
        long[][] batches = new long[8][];
        for (int b = 0; b < batches.length; b++) {
            batches[b] = random.longs(16 << b, 0, 3000).toArray();
        }
        BatchPlan plan = new BatchPlan();
        for (long[] ids : batches) {
            plan.plan(ids, 0, ids.length, slots);
        }
        // Steady state: some window of 200 plans allocates nothing (a single window may catch a
        // one-off allocation of the JVM's own, such as objects rematerialised by a deoptimisation).
        long fewest = Long.MAX_VALUE;
        for (int window = 0; window < 10 && fewest > 0; window++) {
            long before = threads.getCurrentThreadAllocatedBytes();
            int parts = 0;
            for (int k = 0; k < 200; k++) {
                long[] ids = batches[k % batches.length];
                parts += plan.plan(ids, 0, ids.length, slots).parts();
            }
            fewest = Math.min(fewest, threads.getCurrentThreadAllocatedBytes() - before);
            assertEquals(400, parts);
        }
        assertEquals(0, fewest, "bytes allocated by 200 plans, fewest of 10 windows");
    }

    private static void check(BatchPlan plan, long[] ids, int offset, int count, SlotTable slots, Arena arena,
            SplittableRandom random) {
        // The reference: distinct ids per server in first-appearance order.
        Map<Integer, List<Long>> byServer = new java.util.TreeMap<>();
        Map<Long, Integer> rowOfId = new LinkedHashMap<>();
        for (int i = offset; i < offset + count; i++) {
            long id = ids[i];
            if (!rowOfId.containsKey(id)) {
                List<Long> part = byServer.computeIfAbsent(slots.serverOf(id), s -> new ArrayList<>());
                rowOfId.put(id, part.size());
                part.add(id);
            }
        }
        assertEquals(count, plan.count());
        assertEquals(rowOfId.size(), plan.uniqueCount());
        assertEquals(byServer.size(), plan.parts());
        List<Integer> servers = new ArrayList<>(byServer.keySet());
        int[] partOf = new int[count];
        int[] rowOf = new int[count];
        plan.locate(partOf, rowOf);
        for (int i = 0; i < count; i++) {
            long id = ids[offset + i];
            assertEquals(servers.indexOf(slots.serverOf(id)), partOf[i]);
            assertEquals((int) rowOfId.get(id), rowOf[i]);
        }
        long rowBytes = (long) DIMENSION * Float.BYTES;
        MemorySegment gradients = arena.allocate(Math.max(1, count * rowBytes));
        for (long at = 0; at < count * rowBytes; at += 4) {
            gradients.set(RowLayout.FLOAT, at, (float) random.nextDouble(-1, 1));
        }
        MemorySegment scattered = arena.allocate(Math.max(1, count * rowBytes));
        float[] scatteredArray = new float[count * DIMENSION + 1];
        scatteredArray[count * DIMENSION] = Float.NaN;
        for (int p = 0; p < plan.parts(); p++) {
            List<Long> expected = byServer.get(servers.get(p));
            assertEquals(servers.get(p), plan.server(p));
            assertArrayEquals(expected.stream().mapToLong(Long::longValue).toArray(), plan.ids(p));
            int n = plan.partSize(p);
            MemorySegment written = arena.allocate(8L * n + 8);
            plan.writeIds(p, written);
            for (int r = 0; r < n; r++) {
                assertEquals((long) expected.get(r), written.get(RowLayout.LONG, 8L * r));
            }
            // The same ids at an offset of a buffer (after a request header), and copied into an array.
            MemorySegment atOffset = arena.allocate(8L * n + 40);
            plan.writeIds(p, atOffset, 40);
            long[] copied = new long[n + 2];
            copied[n] = copied[n + 1] = -7;
            assertEquals(n, plan.copyIds(p, copied));
            for (int r = 0; r < n; r++) {
                assertEquals((long) expected.get(r), atOffset.get(RowLayout.LONG, 40 + 8L * r));
                assertEquals((long) expected.get(r), copied[r]);
            }
            assertEquals(-7, copied[n], "copyIds wrote past the part");
            if (n > 0) {
                int part = p;
                assertThrows(PsException.class, () -> plan.copyIds(part, new long[n - 1]));
                assertThrows(PsException.class, () -> plan.writeIds(part, written, 16));
            }
            // Sums: f32 from zero, in the caller's order.
            float[] sums = new float[n * DIMENSION];
            for (int i = 0; i < count; i++) {
                if (partOf[i] == p) {
                    for (int j = 0; j < DIMENSION; j++) {
                        sums[rowOf[i] * DIMENSION + j] += gradients.get(RowLayout.FLOAT, i * rowBytes + 4L * j);
                    }
                }
            }
            MemorySegment summed = arena.allocate(Math.max(1, n * rowBytes));
            plan.sumGradients(p, gradients, DIMENSION, summed);
            float[] actual = new float[n * DIMENSION];
            MemorySegment.copy(summed, RowLayout.FLOAT, 0, actual, 0, actual.length);
            assertArrayEquals(sums, actual, "sums of part " + p);
            // Scatter the sums back: each caller position gets its id's row, into native memory
            // and into the caller's array alike.
            plan.scatterRows(p, summed, DIMENSION, scattered);
            plan.scatterRows(p, summed, DIMENSION, scatteredArray);
        }
        Map<Long, float[]> sumOfId = new java.util.HashMap<>();
        for (int k = 0; k < count; k++) {
            float[] sum = sumOfId.computeIfAbsent(ids[offset + k], x -> new float[DIMENSION]);
            for (int j = 0; j < DIMENSION; j++) {
                sum[j] += gradients.get(RowLayout.FLOAT, k * rowBytes + 4L * j);
            }
        }
        for (int i = 0; i < count; i++) {
            float[] row = new float[DIMENSION];
            MemorySegment.copy(scattered, RowLayout.FLOAT, i * rowBytes, row, 0, DIMENSION);
            assertArrayEquals(sumOfId.get(ids[offset + i]), row, "position " + i);
            assertArrayEquals(row, java.util.Arrays.copyOfRange(scatteredArray, i * DIMENSION, (i + 1) * DIMENSION),
                    "position " + i + " in the array");
        }
        assertEquals(Float.NaN, scatteredArray[count * DIMENSION], "the array scatter wrote past its rows");
        if (count > 0 && plan.parts() > 0) {
            assertThrows(PsException.class, () -> plan.scatterRows(0, MemorySegment.NULL, DIMENSION, scatteredArray));
            assertThrows(PsException.class, () -> plan.scatterRows(0, scattered, DIMENSION, new float[count * DIMENSION - 1]));
        }
    }
}
