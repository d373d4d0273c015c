package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Gathers read rows without the stripe locks (a seqlock per shard). Writers step rows of 64
 * weights (four vector stores each) while others create rows, so the index of every shard is
 * rehashed under the readers; every element of a row gets the same gradient, so a row whose
 * elements differ was read half-written. Readers never see one, and the final rows are the
 * exact serial sums.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OptimisticGatherTest {

    private static final int DIMENSION = 64;
    private static final int WRITERS = 3;
    private static final int READERS = 2;
    private static final int POOL = 256;
    private static final int BATCH = 32;

    @Test
    void gathersNeverSeeATornRowWhileRowsAreSteppedAndIndexesGrow() throws Exception {
        int pushes = TestScale.pick(1_500, 20_000);
        long[] pool = new long[POOL];
        for (int i = 0; i < POOL; i++) {
            pool[i] = i;
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults())) {
            SparseTable table = server.createTable(TableConfig.of("t", DIMENSION, Optimizer.sgd(1)).withShards(4));
            try (Arena arena = Arena.ofConfined()) {
                table.gather(pool, 0, POOL, arena.allocate((long) POOL * DIMENSION * Float.BYTES));
            }
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicBoolean writing = new AtomicBoolean(true);
            AtomicLong gathers = new AtomicLong();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> writers = new ArrayList<>();
            for (int t = 0; t < WRITERS; t++) {
                int thread = t;
                writers.add(Thread.ofPlatform().start(() -> {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment g = arena.allocate((long) BATCH * DIMENSION * Float.BYTES);
                        long[] ids = new long[BATCH];
                        start.await();
                        for (int k = 0; k < pushes; k++) {
                            for (int i = 0; i < BATCH; i++) {
                                // Most ids from the pool; every fourth a new one, so indexes grow.
                                ids[i] = i % 4 == 3 ? 1_000_000L * (thread + 1) + (long) k * BATCH + i
                                        : pool[(k * 7 + i * 13 + thread) % POOL];
                                float value = gradient(thread, k, i);
                                for (int j = 0; j < DIMENSION; j++) {
                                    g.set(RowLayout.FLOAT, ((long) i * DIMENSION + j) * Float.BYTES, value);
                                }
                            }
                            table.apply(ids, 0, BATCH, g);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            List<Thread> readers = new ArrayList<>();
            for (int r = 0; r < READERS; r++) {
                readers.add(Thread.ofPlatform().start(() -> {
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment out = arena.allocate((long) POOL * DIMENSION * Float.BYTES);
                        start.await();
                        while (writing.get()) {
                            table.gather(pool, 0, POOL, out);
                            checkWhole(out, POOL);
                            gathers.incrementAndGet();
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }));
            }
            start.countDown();
            for (Thread t : writers) {
                t.join();
            }
            writing.set(false);
            for (Thread t : readers) {
                t.join();
            }
            if (failure.get() != null) {
                throw new AssertionError(failure.get());
            }
            assertTrue(gathers.get() > 0);
            assertEquals(POOL + (long) WRITERS * pushes * (BATCH / 4), table.rows());
            double[] serial = new double[POOL];
            for (int t = 0; t < WRITERS; t++) {
                for (int k = 0; k < pushes; k++) {
                    for (int i = 0; i < BATCH; i++) {
                        if (i % 4 != 3) {
                            serial[(k * 7 + i * 13 + t) % POOL] += gradient(t, k, i);
                        }
                    }
                }
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment out = arena.allocate((long) POOL * DIMENSION * Float.BYTES);
                table.gather(pool, 0, POOL, out);
                for (int i = 0; i < POOL; i++) {
                    assertEquals(0f - (float) serial[i], out.get(RowLayout.FLOAT, (long) i * DIMENSION * Float.BYTES),
                            "id " + i);
                }
            }
            System.out.printf("%d gathers of %d rows beside %d pushes, no torn row%n", gathers.get(), POOL,
                    WRITERS * pushes);
        }
    }

    @Test
    void aTableClosedUnderItsReadersFailsThemWithClosed() throws Exception {
        long[] ids = new long[1024];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i;
        }
        ParameterServer server = ParameterServer.create(PsConfig.defaults());
        SparseTable table = server.createTable(TableConfig.of("t", DIMENSION, Optimizer.adagrad(0.1)));
        try (Arena arena = Arena.ofConfined()) {
            table.gather(ids, 0, ids.length, arena.allocate((long) ids.length * DIMENSION * Float.BYTES));
        }
        AtomicReference<Throwable> unexpected = new AtomicReference<>();
        AtomicLong closedSeen = new AtomicLong();
        CountDownLatch reading = new CountDownLatch(READERS);
        List<Thread> readers = new ArrayList<>();
        for (int r = 0; r < READERS; r++) {
            readers.add(Thread.ofPlatform().start(() -> {
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment out = arena.allocate((long) ids.length * DIMENSION * Float.BYTES);
                    reading.countDown();
                    while (true) {
                        table.gather(ids, 0, ids.length, out);
                    }
                } catch (PsException e) {
                    if (e.code() == PsException.Code.CLOSED) {
                        closedSeen.incrementAndGet();
                    } else {
                        unexpected.compareAndSet(null, e);
                    }
                } catch (Throwable e) {
                    unexpected.compareAndSet(null, e);
                }
            }));
        }
        reading.await();
        Thread.sleep(50);
        server.close();
        for (Thread t : readers) {
            t.join();
        }
        if (unexpected.get() != null) {
            throw new AssertionError(unexpected.get());
        }
        assertEquals(READERS, closedSeen.get());
    }

    private static void checkWhole(MemorySegment out, int rows) {
        for (int i = 0; i < rows; i++) {
            long at = (long) i * DIMENSION * Float.BYTES;
            int first = Float.floatToRawIntBits(out.get(RowLayout.FLOAT, at));
            for (int j = 1; j < DIMENSION; j++) {
                int bits = Float.floatToRawIntBits(out.get(RowLayout.FLOAT, at + 4L * j));
                if (bits != first) {
                    throw new AssertionError("torn row " + i + ": element 0 = " + Float.intBitsToFloat(first)
                            + ", element " + j + " = " + Float.intBitsToFloat(bits));
                }
            }
        }
    }

    /** Multiples of 1/64, small: every f32 sum of them is exact, so any order gives the same bits. */
    private static float gradient(int t, int k, int i) {
        return ((t * 31 + k * 7 + i) % 33 - 16) / 64f;
    }
}
