package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Pulls and pushes while the evictor deletes rows: 100 hot rows, pushed by two threads with
 * SGD at learning rate 1 and gradient 1 (sums exact in f32), are never the policy's first
 * (LFU: they have steps, the cold rows that two pullers create have none), so they keep exact
 * sums; every pulled row is whole, a cold row never shows a hot row's values through a reused
 * slot, and the table never holds more than its capacity.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class EvictionConcurrencyTest {

    private static final int D = EvictionTest.D;
    private static final int HOT = 100;
    private static final int CAPACITY = 2_000;

    @Test
    void rowsThatAreNotEvictedKeepExactSumsWhileTheEvictorRuns() throws Exception {
        TableConfig config = TableConfig.of("c", D, Optimizer.sgd(1)).withShards(8)
                .capacity(CAPACITY, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.2);
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false);
        int pushesPerThread = TestScale.pick(1_500, 20_000);
        long[] hot = EvictionTest.range(0, HOT);
        EvictionTest.push(t, hot, 1f); // every hot row has a step before the evictor starts
        AtomicBoolean done = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        AtomicLong maxRows = new AtomicLong();
        AtomicLong evictorRounds = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        Thread evictor = Thread.ofPlatform().name("test-evictor").unstarted(() -> {
            while (!done.get()) {
                t.evictor().runOnce();
                evictorRounds.incrementAndGet();
            }
        });
        for (int p = 0; p < 2; p++) {
            threads.add(Thread.ofPlatform().name("pusher-" + p).unstarted(() -> {
                for (int i = 0; i < pushesPerThread; i++) {
                    EvictionTest.push(t, hot, 1f);
                }
            }));
        }
        for (int p = 0; p < 2; p++) {
            long base = (p + 1) * 1_000_000_000L;
            threads.add(Thread.ofPlatform().name("puller-" + p).unstarted(() -> {
                float[] out = new float[(HOT + 200) * D];
                long[] ids = new long[HOT + 200];
                long next = base;
                float[] lastHot = new float[HOT];
                while (!done.get()) {
                    for (int i = 0; i < HOT; i++) {
                        ids[i] = i;
                    }
                    for (int i = HOT; i < ids.length; i++) {
                        ids[i] = next++; // new cold ids: created by the pull
                    }
                    t.gather(ids, 0, ids.length, MemorySegment.ofArray(out));
                    for (int i = 0; i < HOT; i++) {
                        float w = out[i * D];
                        for (int j = 1; j < D; j++) {
                            assertEquals(w, out[i * D + j], "hot row " + i + " is whole");
                        }
                        assertEquals(Math.rint(w), w, "hot row " + i + " holds a whole number of steps");
                        assertTrue(w <= lastHot[i], "hot row " + i + " only goes down: " + w + " after " + lastHot[i]);
                        lastHot[i] = w;
                    }
                    for (int i = HOT * D; i < out.length; i++) {
                        assertEquals(0f, out[i], "a cold row pulls its initial zeros");
                    }
                    maxRows.accumulateAndGet(t.rows(), Math::max);
                }
            }));
        }
        for (Thread th : threads) {
            th.setUncaughtExceptionHandler((x, e) -> failures.add(e));
        }
        evictor.setUncaughtExceptionHandler((x, e) -> failures.add(e));
        evictor.start();
        threads.forEach(Thread::start);
        threads.get(0).join();
        threads.get(1).join();
        // On a loaded machine the pushers can finish before the pullers have created enough cold
        // rows to pass the capacity: let the pullers and the evictor go on until it has deleted
        // some (the test's timeout bounds the wait).
        while (t.stats().evictedCapacity() == 0 && failures.isEmpty()) {
            Thread.sleep(1);
        }
        done.set(true);
        for (Thread th : threads) {
            th.join();
        }
        evictor.join();
        try {
            if (!failures.isEmpty()) {
                Throwable first = failures.peek();
                throw new AssertionError(failures.size() + " failures, the first: " + first, first);
            }
            float[] w = EvictionTest.pull(t, hot);
            for (int i = 0; i < HOT; i++) {
                for (int j = 0; j < D; j++) {
                    assertEquals(-(1 + 2f * pushesPerThread), w[i * D + j], "hot id " + i + " element " + j);
                }
                assertEquals(1 + 2L * pushesPerThread, EvictionTest.steps(t, i));
            }
            TableStats stats = t.stats();
            assertTrue(stats.evictedCapacity() > 0, stats.toString());
            assertTrue(maxRows.get() <= CAPACITY, maxRows + " rows");
            assertEquals(stats.admitted() - stats.evictedCapacity(), stats.rows());
            System.out.printf("%d pushes of %d hot rows by 2 threads beside 2 pullers and %d evictor rounds: "
                    + "%s%n", 2 * pushesPerThread, HOT, evictorRounds.get(), stats);
        } finally {
            t.close();
        }
    }

    /**
     * Pushes that race with the eviction of their own rows (LFU, pushes of new ids, each pushed
     * exactly once with gradient 1): a push's row may be deleted between finding it and stepping
     * it, and its slot reused by another id; the step must then be dropped, never applied to a
     * freed slot or to another id's row. Every row ends with 0 or 1 step and its exact weights,
     * every live row is in its shard's index (and only those), and no evictor pass hangs.
     */
    @Test
    void pushesRacingTheEvictionOfTheirRowsNeverStepAnotherRow() throws Exception {
        TableConfig config = TableConfig.of("r", D, Optimizer.sgd(1)).withShards(4)
                .capacity(1_000, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.5); // new rows (0 steps) go first
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false);
        int batches = TestScale.pick(3_000, 30_000);
        int batch = 64;
        AtomicBoolean done = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        Thread evictor = Thread.ofPlatform().name("test-evictor").unstarted(() -> {
            while (!done.get()) {
                t.evictor().runOnce();
            }
        });
        List<Thread> pushers = new ArrayList<>();
        for (int p = 0; p < 2; p++) {
            long base = p * (1L << 40);
            pushers.add(Thread.ofPlatform().name("pusher-" + p).unstarted(() -> {
                long[] ids = new long[batch];
                for (int b = 0; b < batches; b++) {
                    for (int i = 0; i < batch; i++) {
                        ids[i] = base + (long) b * batch + i;
                    }
                    EvictionTest.push(t, ids, 1f);
                }
            }));
        }
        evictor.setUncaughtExceptionHandler((x, e) -> failures.add(e));
        pushers.forEach(th -> th.setUncaughtExceptionHandler((x, e) -> failures.add(e)));
        evictor.start();
        pushers.forEach(Thread::start);
        for (Thread th : pushers) {
            th.join();
        }
        done.set(true);
        evictor.join();
        try {
            if (!failures.isEmpty()) {
                Throwable first = failures.peek();
                throw new AssertionError(failures.size() + " failures, the first: " + first, first);
            }
            int live = 0;
            for (int s = 0; s < t.shardCount(); s++) {
                Shard shard = t.shard(s);
                shard.lock.lock();
                try {
                    live += shard.checkIndex();
                } finally {
                    shard.lock.unlock();
                }
            }
            assertEquals(t.rows(), live);
            long stepped = 0;
            for (int p = 0; p < 2; p++) {
                for (long i = 0; i < (long) batches * batch; i++) {
                    long id = p * (1L << 40) + i;
                    byte[] row = t.rawRow(id);
                    if (row == null) {
                        continue;
                    }
                    long steps = EvictionTest.steps(t, id);
                    assertTrue(steps == 0 || steps == 1, "id " + id + " has " + steps + " steps");
                    stepped += steps;
                    float[] w = EvictionTest.pull(t, id);
                    for (int j = 0; j < D; j++) {
                        assertEquals(-steps, w[j], 0f, "id " + id);
                    }
                }
            }
            TableStats stats = t.stats();
            assertTrue(stats.evictedCapacity() > 0, stats.toString());
            System.out.printf("%d pushes of %d new ids racing the evictor: %d steps lost with their rows, %d rows "
                    + "left (%d stepped); %s%n", 2 * batches, batch, t.lostToEviction(), live, stepped, stats);
        } finally {
            t.close();
        }
    }
}
