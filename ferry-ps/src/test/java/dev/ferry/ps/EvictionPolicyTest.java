package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Each capacity policy against an exact reference model over a deterministic stream of pulls
 * and pushes (skewed ids, duplicates, a clock that stands still over two batches so that last
 * updates tie): after every batch and evictor round, the table stores exactly the model's ids,
 * each with the model's step count. The model: a map id to (last update, steps); over the
 * trigger (900 of a capacity of 1,000 with margin 0.2) it drops the first rows by (last update, id)
 * for LRU and (steps, last update, id) for LFU down to the target (800).
 */
class EvictionPolicyTest {

    private static final int D = EvictionTest.D;
    private static final int UNIVERSE = 3_000;
    private static final int CAPACITY = 1_000;
    private static final double MARGIN = 0.2;
    private static final int BATCH = 80;
    private static final int BATCHES = 400;

    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void theTableKeepsExactlyTheRowsTheReferenceModelKeeps(EvictionPolicy policy) {
        AtomicLong clock = new AtomicLong(-5_000); // negative stamps too
        TableConfig config = TableConfig.of("p", D, Optimizer.sgd(0.1)).withShards(4)
                .capacity(CAPACITY, policy, MARGIN);
        long target = config.eviction().target();
        long trigger = config.eviction().trigger();
        assertEquals(800, target);
        assertEquals(900, trigger);
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false, clock::get);
        Map<Long, long[]> model = new HashMap<>(); // id -> {last update, steps}
        SplittableRandom random = new SplittableRandom(11);
        Set<Long> universe = EvictionTest.universe(UNIVERSE);
        long evicted = 0;
        try {
            for (int b = 0; b < BATCHES; b++) {
                if (b % 2 == 0) {
                    clock.addAndGet(7);
                }
                long now = clock.get();
                long[] ids = new long[BATCH];
                for (int i = 0; i < BATCH; i++) {
                    // Skewed: a third of the sightings on 150 hot ids, the rest anywhere.
                    ids[i] = random.nextInt(3) == 0 ? random.nextInt(150) : random.nextInt(UNIVERSE);
                }
                if (random.nextBoolean()) {
                    EvictionTest.push(t, ids, 0.5f);
                    for (long id : ids) {
                        long[] row = model.computeIfAbsent(id, k -> new long[2]);
                        row[0] = now;
                        row[1]++;
                    }
                } else {
                    EvictionTest.pull(t, ids);
                    for (long id : ids) {
                        model.computeIfAbsent(id, k -> new long[] {now, 0});
                    }
                }
                assertTrue(model.size() < CAPACITY, "the stream never reaches the capacity: no refusals");
                int deleted = t.evictor().runOnce();
                int expected = model.size() > trigger ? (int) (model.size() - target) : 0;
                evictModel(model, expected, policy);
                assertEquals(expected, deleted, "batch " + b);
                evicted += deleted;
                assertEquals(new ArrayList<>(new TreeMap<>(model).keySet()), EvictionTest.stored(t, universe),
                        "batch " + b);
                for (Map.Entry<Long, long[]> e : model.entrySet()) {
                    assertEquals(e.getValue()[1], EvictionTest.steps(t, e.getKey()), "steps of id " + e.getKey());
                }
            }
            TableStats stats = t.stats();
            assertEquals(evicted, stats.evictedCapacity());
            assertEquals(0, stats.refusedFull());
            assertTrue(evicted > 10 * BATCH, evicted + " rows evicted");
            System.out.printf("%s: %d batches, %d rows evicted, %d stored, %d capacity passes%n", policy, BATCHES,
                    evicted, stats.rows(), t.evictor().passes());
        } finally {
            t.close();
        }
    }

    private static void evictModel(Map<Long, long[]> model, int k, EvictionPolicy policy) {
        Comparator<Map.Entry<Long, long[]>> lru = Comparator.<Map.Entry<Long, long[]>>comparingLong(e -> e.getValue()[0])
                .thenComparingLong(Map.Entry::getKey);
        Comparator<Map.Entry<Long, long[]>> lfu = Comparator.<Map.Entry<Long, long[]>>comparingLong(e -> e.getValue()[1])
                .thenComparingLong(e -> e.getValue()[0]).thenComparingLong(Map.Entry::getKey);
        List<Map.Entry<Long, long[]>> order = new ArrayList<>(model.entrySet());
        order.sort(policy == EvictionPolicy.LEAST_RECENTLY_UPDATED ? lru : lfu);
        for (int i = 0; i < k; i++) {
            model.remove(order.get(i).getKey());
        }
    }

    /** Ties in the first key fall to the second, then to the smaller id, also for negative ids. */
    @ParameterizedTest
    @EnumSource(EvictionPolicy.class)
    void tiesFallToTheSmallerId(EvictionPolicy policy) {
        AtomicLong clock = new AtomicLong(100);
        TableConfig config = TableConfig.of("ties", D, Optimizer.sgd(0.1)).withShards(2).capacity(10, policy, 0.5);
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false, clock::get);
        try {
            long[] ids = {9, -3, 4, 1L << 40, -(1L << 50), 0, 7, 2};
            EvictionTest.pull(t, ids); // all at 100 with 0 steps
            clock.set(101);
            EvictionTest.push(t, new long[] {-3}, 1f); // newest, and the only one with a step
            assertEquals(3, t.evictor().runOnce(), "8 rows, over the trigger 7: down to the target 5");
            // LRU and LFU alike: the oldest/fewest first, -3 last; among the others the smaller ids go.
            assertEquals(List.of(-3L, 7L, 9L, 1L << 40, 4L).stream().sorted().toList(),
                    EvictionTest.stored(t, Set.of(9L, -3L, 4L, 1L << 40, -(1L << 50), 0L, 7L, 2L)));
        } finally {
            t.close();
        }
    }
}
