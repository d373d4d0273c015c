package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Sixteen pushers on overlapping ids and a puller beside them. Gradients are the same in every
 * element of a row, so a row whose elements differ was read half-updated (torn). SGD gradients are
 * multiples of 1/64 small enough that every float sum is exact: any serial order then gives the
 * same bits, and so must the concurrent run.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConcurrentPushTest {

    private static final int THREADS = 16;
    private static final int DIMENSION = 16;
    private static final int BATCH = 64;

    @Test
    void sixteenSgdPushersEqualTheSerialSumAndPullsSeeWholeRows() throws Exception {
        int pushes = TestScale.pick(400, 4_000);
        long[] pool = new SplittableRandom(5).longs(256).toArray();
        Run run = run(Optimizer.sgd(1), pool, pushes);
        Map<Long, Double> serial = new HashMap<>();
        for (int t = 0; t < THREADS; t++) {
            for (int k = 0; k < pushes; k++) {
                long[] ids = batch(pool, t, k);
                for (int i = 0; i < BATCH; i++) {
                    serial.merge(ids[i], (double) gradient(t, k, i), Double::sum);
                }
            }
        }
        for (int i = 0; i < pool.length; i++) {
            float expected = (float) -serial.getOrDefault(pool[i], 0.0);
            for (int j = 0; j < DIMENSION; j++) {
                assertEquals(expected, run.finalRows[i * DIMENSION + j], "id " + pool[i]);
            }
        }
        System.out.printf("SGD: %d pushes of %d ids by %d threads, %d pulls, no torn row%n",
                THREADS * pushes, BATCH, THREADS, run.pulls);
    }

    @Test
    void adamRowsCountEveryStepAndStayWhole() throws Exception {
        int pushes = TestScale.pick(200, 2_000);
        long[] pool = new SplittableRandom(6).longs(128).toArray();
        Run run = run(Optimizer.adam(0.01), pool, pushes);
        Map<Long, Long> occurrences = new HashMap<>();
        for (int t = 0; t < THREADS; t++) {
            for (int k = 0; k < pushes; k++) {
                for (long id : batch(pool, t, k)) {
                    occurrences.merge(id, 1L, Long::sum);
                }
            }
        }
        for (long id : pool) {
            MemorySegment row = MemorySegment.ofArray(run.table.rawRow(id));
            assertEquals((long) occurrences.getOrDefault(id, 0L), row.get(RowLayout.LONG, RowLayout.STEPS_OFFSET));
        }
        run.server.close();
    }

    private record Run(ParameterServer server, SparseTable table, float[] finalRows, long pulls) {
    }

    private static Run run(Optimizer optimizer, long[] pool, int pushes) throws Exception {
        ParameterServer server = ParameterServer.create(PsConfig.defaults());
        SparseTable table = server.createTable(TableConfig.of("shared", DIMENSION, optimizer));
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean pushing = new AtomicBoolean(true);
        AtomicLong pulls = new AtomicLong();
        List<Thread> pushers = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int thread = t;
            pushers.add(Thread.ofPlatform().start(() -> {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment gradients = arena.allocate((long) BATCH * DIMENSION * Float.BYTES);
                    start.await();
                    for (int k = 0; k < pushes; k++) {
                        for (int i = 0; i < BATCH; i++) {
                            float g = gradient(thread, k, i);
                            for (int j = 0; j < DIMENSION; j++) {
                                gradients.set(RowLayout.FLOAT, ((long) i * DIMENSION + j) * Float.BYTES, g);
                            }
                        }
                        table.apply(batch(pool, thread, k), 0, BATCH, gradients);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        Thread puller = Thread.ofPlatform().start(() -> {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment out = arena.allocate((long) pool.length * DIMENSION * Float.BYTES);
                start.await();
                while (pushing.get()) {
                    table.gather(pool, 0, pool.length, out);
                    checkWhole(pool, out);
                    pulls.incrementAndGet();
                }
            } catch (Throwable e) {
                failure.compareAndSet(null, e);
            }
        });
        start.countDown();
        for (Thread t : pushers) {
            t.join();
        }
        pushing.set(false);
        puller.join();
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        assertTrue(pulls.get() > 0);
        float[] rows = new float[pool.length * DIMENSION];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate((long) rows.length * Float.BYTES);
            table.gather(pool, 0, pool.length, out);
            MemorySegment.copy(out, RowLayout.FLOAT, 0, rows, 0, rows.length);
        }
        if (optimizer instanceof Optimizer.Sgd) {
            server.close();
        }
        return new Run(server, table, rows, pulls.get());
    }

    private static void checkWhole(long[] pool, MemorySegment out) {
        for (int i = 0; i < pool.length; i++) {
            float first = out.get(RowLayout.FLOAT, (long) i * DIMENSION * Float.BYTES);
            for (int j = 1; j < DIMENSION; j++) {
                float v = out.get(RowLayout.FLOAT, ((long) i * DIMENSION + j) * Float.BYTES);
                if (Float.floatToRawIntBits(v) != Float.floatToRawIntBits(first)) {
                    throw new AssertionError("torn row for id " + pool[i] + ": element 0 = " + first
                            + ", element " + j + " = " + v);
                }
            }
        }
    }

    /** Thread t's k-th batch: overlapping ids, duplicates included. */
    private static long[] batch(long[] pool, int t, int k) {
        SplittableRandom random = new SplittableRandom(t * 1_000_003L + k);
        long[] ids = new long[BATCH];
        for (int i = 0; i < BATCH; i++) {
            ids[i] = pool[random.nextInt(pool.length)];
        }
        return ids;
    }

    private static float gradient(int t, int k, int i) {
        return ((t * 31 + k * 7 + i) % 33 - 16) / 64f;
    }
}
