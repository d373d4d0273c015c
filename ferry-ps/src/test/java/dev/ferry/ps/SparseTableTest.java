package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SparseTableTest {

    @Test
    void gatherCreatesRowsWithTheInitializerInTheCallersOrder() {
        Initializer init = Initializer.uniform(-1, 1, 5);
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("emb", 3, Optimizer.sgd(0.1)).withInitializer(init));
            long[] ids = {-7, 42, Long.MIN_VALUE, 42, 0, Long.MAX_VALUE, -7};
            MemorySegment out = arena.allocate(ids.length * 3L * Float.BYTES);
            table.gather(ids, 0, ids.length, out);
            assertEquals(5, table.rows());
            for (int i = 0; i < ids.length; i++) {
                for (int j = 0; j < 3; j++) {
                    assertEquals(init.valueAt(ids[i], j), out.get(RowLayout.FLOAT, (i * 3L + j) * 4));
                }
            }
            // An offset into the ids array, and the same rows again.
            MemorySegment two = arena.allocate(2 * 3L * Float.BYTES);
            table.gather(ids, 3, 2, two);
            assertEquals(out.asSlice(3 * 12, 24).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE).length, 24);
            assertArrayEquals(out.asSlice(3 * 12, 24).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                    two.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
            assertNull(table.rawRow(99));
        }
    }

    /**
     * A push reads the home index entries of a shard's ids before it finds or creates their rows:
     * an id new to the table that comes back later in the same batch, after its row was created
     * and the index grew and rehashed meanwhile, must step that row, not create a second one. The
     * batch (one shard, so every id shares its index; Adagrad, so the order of steps shows) must
     * leave every row as pushing its ids one at a time does, and the index must hold one entry
     * per row.
     */
    @Test
    void aPushCreatingIdsTwiceWhileTheIndexGrowsEqualsOneIdAtATime() {
        int n = 3_000;
        SplittableRandom random = new SplittableRandom(31);
        long[] ids = new long[n];
        for (int i = 0; i < n; i++) {
            ids[i] = random.nextInt(1_200) * 977L; // about 1,100 distinct ids, most of them more than once
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable batch = server.createTable(TableConfig.of("batch", 5, Optimizer.adagrad(0.5)).withShards(1));
            SparseTable single = server.createTable(TableConfig.of("single", 5, Optimizer.adagrad(0.5)).withShards(1));
            MemorySegment gradients = arena.allocate(n * 20L, 8);
            for (long at = 0; at < gradients.byteSize(); at += 4) {
                gradients.set(RowLayout.FLOAT, at, (float) random.nextDouble(-1, 1));
            }
            batch.apply(ids, 0, n, gradients);
            for (int i = 0; i < n; i++) {
                single.apply(ids, i, 1, gradients.asSlice(i * 20L, 20));
            }
            assertEquals(single.rows(), batch.rows());
            for (long id : ids) {
                assertArrayEquals(single.rawRow(id), batch.rawRow(id), "id " + id);
            }
            Shard shard = batch.shard(0);
            shard.lock.lock();
            try {
                assertEquals(batch.rows(), shard.checkIndex());
            } finally {
                shard.lock.unlock();
            }
        }
    }

    /**
     * A push whose gradients are a heap array (a replayed push's, or an embedding caller's
     * {@code MemorySegment.ofArray(float[])}) steps its rows to the same bits as the same gradients
     * in native memory: a heap segment has no address to prefetch, so its lines are touched
     * instead while the rows' own lines are prefetched. Rows of 20 weights (one whole gradient
     * line and a part), four shards, batches much longer than the prefetch distance, at an
     * offset into the array, ids repeated within a batch.
     */
    @Test
    void aPushFromAHeapArrayStepsRowsAsFromNativeMemory() {
        int n = 3_000;
        int batch = 600;
        SplittableRandom random = new SplittableRandom(47);
        long[] ids = new long[n];
        for (int i = 0; i < n; i++) {
            ids[i] = random.nextInt(1_000) * 7_919L - 3;
        }
        float[] heap = new float[n * 20 + 1];
        for (int i = 0; i < heap.length; i++) {
            heap[i] = (float) random.nextDouble(-1, 1);
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable fromHeap = server.createTable(TableConfig.of("heap", 20, Optimizer.adagrad(0.5)).withShards(4));
            SparseTable fromNative = server.createTable(TableConfig.of("native", 20, Optimizer.adagrad(0.5))
                    .withShards(4));
            MemorySegment heapGradients = MemorySegment.ofArray(heap).asSlice(Float.BYTES);
            MemorySegment nativeGradients = arena.allocate(n * 80L, 64);
            MemorySegment.copy(heapGradients, 0, nativeGradients, 0, n * 80L);
            for (int round = 0; round < 2; round++) { // creates the rows, then steps rows that exist
                for (int from = 0; from < n; from += batch) {
                    fromHeap.apply(ids, from, batch, heapGradients.asSlice(from * 80L, batch * 80L));
                    fromNative.apply(ids, from, batch, nativeGradients.asSlice(from * 80L, batch * 80L));
                }
            }
            assertEquals(fromNative.rows(), fromHeap.rows());
            for (long id : ids) {
                assertArrayEquals(fromNative.rawRow(id), fromHeap.rawRow(id), "id " + id);
            }
        }
    }

    /**
     * Rows of 32,768 weights (2,048 lines each): a gather prefetches them in calls of at most
     * {@link LinePrefetch#CALL_LINES} lines (8 rows a call here), a push one row a call; the
     * weights are still exactly the sums of their (integer) gradients, ids repeated in a batch.
     */
    @Test
    void wideRowsArePushedAndGatheredExactly() {
        int dimension = 1 << 15;
        long[] ids = new long[24];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i % 19 * 1_000_003L; // ids 0 to 4 twice
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("wide", dimension, Optimizer.sgd(1)).withShards(4));
            long rowBytes = (long) dimension * Float.BYTES;
            MemorySegment gradients = arena.allocate(ids.length * rowBytes, 64);
            float[] expected = new float[19 * dimension];
            for (int i = 0; i < ids.length; i++) {
                for (int j = 0; j < dimension; j++) {
                    float g = (i + j) % 7 - 3;
                    gradients.set(RowLayout.FLOAT, i * rowBytes + j * 4L, g);
                    expected[i % 19 * dimension + j] -= g;
                }
            }
            table.apply(ids, 0, ids.length, gradients);
            MemorySegment out = arena.allocate(ids.length * rowBytes, 64);
            table.gather(ids, 0, ids.length, out);
            for (int i = 0; i < ids.length; i++) {
                float[] row = out.asSlice(i * rowBytes, rowBytes).toArray(RowLayout.FLOAT);
                assertArrayEquals(java.util.Arrays.copyOfRange(expected, i % 19 * dimension, (i % 19 + 1) * dimension),
                        row, "id " + ids[i]);
            }
        }
    }

    @Test
    void manyRowsSurviveIndexGrowthAcrossShards() {
        int n = TestScale.pick(200_000, 2_000_000);
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("big", 2, Optimizer.sgd(1)).withMaxRows(n)
                    .withShards(8));
            long[] ids = new long[n];
            for (int i = 0; i < n; i++) {
                ids[i] = i * 0x1000L; // regular ids: the hash must still spread them
            }
            MemorySegment gradients = arena.allocate(n * 8L);
            for (int i = 0; i < n; i++) {
                gradients.set(RowLayout.FLOAT, i * 8L, -i);
                gradients.set(RowLayout.FLOAT, i * 8L + 4, i + 0.5f);
            }
            for (int from = 0; from < n; from += 50_000) {
                int count = Math.min(50_000, n - from);
                table.apply(ids, from, count, gradients.asSlice(from * 8L, count * 8L));
            }
            assertEquals(n, table.rows());
            long[] reversed = new long[n];
            for (int i = 0; i < n; i++) {
                reversed[i] = ids[n - 1 - i];
            }
            MemorySegment out = arena.allocate(n * 8L);
            for (int from = 0; from < n; from += 50_000) {
                int count = Math.min(50_000, n - from);
                table.gather(reversed, from, count, out.asSlice(from * 8L, count * 8L));
            }
            for (int i = 0; i < n; i++) {
                int k = n - 1 - i;
                assertEquals((float) k, out.get(RowLayout.FLOAT, i * 8L), "id " + ids[k]);
                assertEquals(-(k + 0.5f), out.get(RowLayout.FLOAT, i * 8L + 4));
            }
            TableStats stats = table.stats();
            assertEquals(n, stats.rows());
            assertEquals(24, stats.bytesPerRow()); // 16 header + 2 weights
            // Stored: 8 bytes of weights + a 24-byte record (id, steps, last-update stamp) per row, in
            // chunks that double (at most twice the rows' bytes), and an index of 16 to 64 bytes per row.
            assertTrue(stats.reservedBytes() >= n * (32L + 16), stats.toString());
            assertTrue(stats.reservedBytes() <= n * (2 * 32L + 64) + 8 * (256 << 10), stats.toString());
            System.out.println(stats);
        }
    }

    @Test
    void bytesPerRowCountsTheOptimizerState() {
        assertEquals(16 + 4 * 10, TableConfig.of("a", 10, Optimizer.sgd(1)).bytesPerRow());
        assertEquals(16 + 4 * 20 + 0, TableConfig.of("a", 10, Optimizer.adagrad(1)).bytesPerRow());
        assertEquals(16 + 4 * 30 + 0, TableConfig.of("a", 10, Optimizer.adam(1)).bytesPerRow());
        assertEquals(16 + 4 * 27 + 4, TableConfig.of("a", 9, Optimizer.ftrl(1)).bytesPerRow()); // padded to 8
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults())) {
            server.createTable(TableConfig.of("adam", 64, Optimizer.adam(0.01)));
            TableStats stats = server.describe("adam");
            assertEquals(16 + 64 * 4 * 3, stats.bytesPerRow());
            assertEquals(0, stats.rows());
            assertEquals(TableConfig.DEFAULT_MAX_ROWS, stats.capacityRows());
        }
    }

    @Test
    void aFullTableRefusesNewRowsAndAppliesNothing() {
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("small", 1, Optimizer.sgd(1)).withMaxRows(100));
            long[] ids = new long[100];
            for (int i = 0; i < 100; i++) {
                ids[i] = 1000 + i;
            }
            table.gather(ids, 0, 100, arena.allocate(400));
            MemorySegment g = arena.allocate(8);
            g.set(RowLayout.FLOAT, 0, 1f);
            g.set(RowLayout.FLOAT, 4, 1f);
            byte[] before = table.rawRow(1000);
            TableFullException full = assertThrows(TableFullException.class,
                    () -> table.apply(new long[] {1000, 5}, 0, 2, g));
            assertEquals(PsException.Code.TABLE_FULL, full.code());
            assertEquals(100, full.capacity());
            assertTrue(full.getMessage().contains("'small'") && full.getMessage().contains("100"), full.getMessage());
            assertArrayEquals(before, table.rawRow(1000), "no gradient applied");
            assertEquals(100, table.rows());
            assertThrows(TableFullException.class, () -> table.gather(new long[] {5}, 0, 1, arena.allocate(4)));
            table.apply(new long[] {1000}, 0, 1, g.asSlice(0, 4)); // existing rows still take pushes
            assertEquals(100, table.stats().rows());
        }
    }

    @Test
    void initializersDependOnlyOnSeedAndId() {
        Initializer normal = Initializer.normal(0.5, 2, 77);
        try (ParameterServer one = ParameterServer.create(PsConfig.defaults());
                ParameterServer other = ParameterServer.create(PsConfig.defaults());
                Arena arena = Arena.ofConfined()) {
            SparseTable a = one.createTable(TableConfig.of("t", 16, Optimizer.sgd(1)).withInitializer(normal).withShards(1));
            SparseTable b = other.createTable(TableConfig.of("t", 16, Optimizer.adam(1)).withInitializer(normal)
                    .withShards(64));
            long[] ids = new SplittableRandom(1).longs(500).toArray();
            MemorySegment outA = arena.allocate(500 * 64L);
            MemorySegment outB = arena.allocate(500 * 64L);
            a.gather(ids, 0, 500, outA);
            long[] reversed = new long[500];
            for (int i = 0; i < 500; i++) {
                reversed[i] = ids[499 - i];
            }
            b.gather(reversed, 0, 500, outB);
            double sum = 0;
            double squares = 0;
            for (int i = 0; i < 500; i++) {
                for (int j = 0; j < 16; j++) {
                    float va = outA.get(RowLayout.FLOAT, (i * 16L + j) * 4);
                    assertEquals(va, outB.get(RowLayout.FLOAT, ((499 - i) * 16L + j) * 4));
                    sum += va;
                    squares += (va - 0.5) * (va - 0.5);
                }
            }
            double mean = sum / 8000;
            double stddev = Math.sqrt(squares / 8000);
            assertEquals(0.5, mean, 0.1);
            assertEquals(2, stddev, 0.1);
        }
        Initializer uniform = Initializer.uniform(-0.25, 0.75, 9);
        double sum = 0;
        for (long id = 0; id < 10_000; id++) {
            float v = uniform.valueAt(id, id % 7);
            assertTrue(v >= -0.25f && v <= 0.75f, "" + v);
            sum += v;
        }
        assertEquals(0.25, sum / 10_000, 0.02);
        assertTrue(uniform.valueAt(1, 0) != Initializer.uniform(-0.25, 0.75, 10).valueAt(1, 0), "the seed matters");
    }
}
