package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.EvictionPolicy;
import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;

/**
 * Deletions and dense tensors over the wire (tcp): rows evicted on training disappear on
 * serving, a row made again after its eviction replaces serving's copy of its older life, and
 * dense tensors arrive whole, never torn, never replaced by an older copy.
 */
class ExportDeletionWireTest extends ExportTestBase {

    @Test
    void anEvictingTableEndsWithExactlyTrainingsRowsOnServing() throws Exception {
        Training t = training(null);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1))
                .capacity(2_000, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0.2));
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            long next = 0;
            for (int batch = 0; batch < 100; batch++) {
                long[] ids = new long[200];
                for (int i = 0; i < ids.length; i++) {
                    ids[i] = next++ * 7 - 3_000;
                }
                push(t.ps(), ids, 1f);
                if (batch % 10 == 0) {
                    push(t.ps(), Arrays.copyOf(ids, 20), 2f); // some rows with more steps
                }
                Thread.sleep(2);
            }
            SparseTable trained = t.ps().table("t");
            await(() -> trained.stats().evictedCapacity() > 0 && trained.rows() <= 2_000 * 0.9, "the evictor's passes");
            await(() -> equal(t.ps(), s.ps()), "serving holding exactly training's rows");
            assertTrue(f.rowsDeleted() > 0, "rows deleted on serving: " + f.rowsDeleted());
            assertEquals(trained.rows(), s.ps().table("t").rows());
            assertTrue(t.export().tombstonesExported() >= f.rowsDeleted());
            assertEquals(0, f.rejectedPages());
        }
    }

    @Test
    void aRowMadeAgainAfterItsEvictionReplacesTheCopyOfItsOlderLife() throws Exception {
        Training t = training(null);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        SparseTable trained = t.ps().table("t");
        for (int i = 0; i < 5; i++) {
            push(t.ps(), new long[] {7, 8}, 1f);
        }
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(t.ps(), s.ps()), "the first catch-up");
            assertEquals(0, f.rowsDeleted());
        }
        SparseTable served = s.ps().table("t");
        assertEquals(5, ExportRows.steps(served, 7));
        // Evicted and made again before the next poll: 1 step, fewer than serving's copy has. By
        // step count alone serving would keep its copy; the tombstone's floor (5) removes it first.
        assertTrue(ExportRows.evict(trained, 7));
        push(t.ps(), new long[] {7}, 3f);
        assertEquals(1, ExportRows.steps(trained, 7));
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(t.ps(), s.ps()), "serving holding the new life");
            assertEquals(1, ExportRows.steps(served, 7));
            assertTrue(f.rowsDeleted() >= 1);
        }
        // Evicted while a follower polls: gone on serving; a pull answers the initializer's values.
        try (DeltaFollower f = follow(s, t)) {
            await(() -> f.rounds() >= 1, "a poll");
            assertTrue(ExportRows.evict(trained, 8));
            await(() -> ExportRows.steps(served, 8) == -1, "row 8 deleted on serving");
            float[] out = new float[DIM];
            Arrays.fill(out, 9f);
            s.ps().pull("t", DIM, new long[] {8}, 0, 1, MemorySegment.ofArray(out));
            assertEquals(0f, out[0]);
            // Made again later: arrives as a new row.
            push(t.ps(), new long[] {8}, 1f);
            await(() -> equal(t.ps(), s.ps()), "row 8's new life on serving");
            assertEquals(1, ExportRows.steps(served, 8));
        }
    }

    @Test
    void denseTensorsArriveWholeNeverTornNeverOlder() throws Exception {
        int length = 4_096;
        Training t = training(null);
        DenseTensor trained = t.ps().createDense(new DenseConfig("w", length, Optimizer.sgd(1), Initializer.zeros()));
        t.ps().createDense(new DenseConfig("v", 8, Optimizer.sgd(1), Initializer.zeros()));
        Serving s = serving();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        AtomicLong reads = new AtomicLong();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> has(s, "w") && has(s, "v"), "both tensors on serving");
            DenseTensor served = s.ps().dense("w");
            Thread reader = Thread.ofPlatform().start(() -> {
                float[] w = new float[length];
                MemorySegment out = MemorySegment.ofArray(w);
                float last = 0;
                while (!stop.get()) {
                    served.read(0, length, out);
                    for (int i = 1; i < length; i++) {
                        if (w[i] != w[0]) {
                            failed.set(new AssertionError("a torn read: w[0] = " + w[0] + ", w[" + i + "] = " + w[i]));
                            return;
                        }
                    }
                    if (w[0] < last) {
                        failed.set(new AssertionError("an older tensor after a newer one: " + w[0] + " after " + last));
                        return;
                    }
                    last = w[0];
                    reads.incrementAndGet();
                }
            });
            float[] g = new float[length];
            Arrays.fill(g, -1f);
            MemorySegment gradients = MemorySegment.ofArray(g);
            for (int k = 0; k < 300; k++) {
                trained.apply(gradients); // every weight k + 1 after k + 1 steps
                if (k % 30 == 0) {
                    Thread.sleep(10);
                }
            }
            await(() -> served.steps() == 300, "serving's tensor at 300 steps");
            stop.set(true);
            reader.join();
            if (failed.get() != null) {
                throw new AssertionError(failed.get());
            }
            float[] a = new float[length];
            float[] b = new float[length];
            trained.read(0, length, MemorySegment.ofArray(a));
            served.read(0, length, MemorySegment.ofArray(b));
            assertTrue(Arrays.equals(a, b) && b[0] == 300f, "serving equals training: " + b[0]);
            assertTrue(reads.get() > 0);
            assertTrue(f.denseApplied() >= 2);
            assertEquals(0, f.rejectedPages());
            // Unchanged tensors do not travel again (once the copy read after the last step's stamp
            // was sent: a copy read later than its stamp is sent once more by the next poll).
            long settle = f.rounds();
            await(() -> f.rounds() >= settle + 2, "two polls after the last step");
            long exported = t.export().denseExported();
            long rounds = f.rounds();
            await(() -> f.rounds() >= rounds + 3, "three more polls");
            assertEquals(exported, t.export().denseExported());
            // A copy with fewer steps never replaces a newer one.
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment row = arena.allocate(DenseTransfer.rowBytes(trained), 8);
                DenseTransfer.copy(trained, row);
                trained.apply(gradients);
                await(() -> served.steps() == 301, "the next step on serving");
                assertFalse(DenseTransfer.merge(served, row, false));
                assertEquals(301, served.steps());
            }
        } finally {
            stop.set(true);
        }
    }

    private static boolean has(Serving s, String name) {
        try {
            s.ps().dense(name);
            return true;
        } catch (PsException notYet) {
            return false;
        }
    }

}
