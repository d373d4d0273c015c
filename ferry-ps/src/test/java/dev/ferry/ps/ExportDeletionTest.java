package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

/**
 * Deletions in the export's record: a deleted row is stamped and keeps a death record with its
 * floor (the most steps a deleted copy had) until the retention passes; a row made again keeps
 * the floor, so that a follower drops the copy of its older life; a deletion never removes a
 * newer row on the follower; dense tensors are stamped by their last step.
 */
class ExportDeletionTest {

    private static final int DIM = 4;
    private static final long SECOND = 1_000_000_000L;

    private static void push(ParameterServer ps, int times, long... ids) {
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, 1f);
        for (int i = 0; i < times; i++) {
            ps.push("t", DIM, ids, 0, ids.length, MemorySegment.ofArray(g));
        }
    }

    private static long[] all(ExportLog log, long since, long upTo) {
        return log.changed("t", since, upTo, 0, true, slot -> true, Integer.MAX_VALUE - 1);
    }

    @Test
    void aDeletionIsStampedWithItsFloorAndForgottenAfterTheRetention() {
        AtomicLong clock = new AtomicLong(100 * SECOND);
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            SparseTable t = ps.table("t");
            push(ps, 3, 1, 2, 3);
            ExportLog log = new ExportLog(ps, 60 * SECOND, clock::get);
            long first = log.seal();
            assertArrayEquals(new long[] {1, 2, 3}, all(log, 0, first));
            assertEquals(-1, log.floor("t", 2));

            assertTrue(ExportRows.evict(t, 2));
            long second = log.seal();
            assertArrayEquals(new long[] {2}, all(log, first, second), "the deletion is a change");
            assertEquals(3, log.floor("t", 2), "the deleted copy had 3 steps");
            assertEquals(1, log.tombstones());

            // Made again (1 step), deleted again: the floor is the most steps a deleted copy had.
            push(ps, 1, 2);
            assertTrue(ExportRows.evict(t, 2));
            push(ps, 1, 2);
            long third = log.seal();
            assertArrayEquals(new long[] {2}, all(log, second, third));
            assertEquals(3, log.floor("t", 2));
            assertEquals(1, ExportRows.steps(t, 2), "a row of a new life");

            // A row deleted for good: forgotten with its death record once the retention passed.
            assertTrue(ExportRows.evict(t, 3));
            long fourth = log.seal();
            assertEquals(3, log.floor("t", 3));
            assertEquals(0, log.forgottenUpTo());
            clock.addAndGet(60 * SECOND);
            log.seal();
            assertEquals(3, log.floor("t", 3), "a retention exactly passed keeps it");
            clock.addAndGet(1);
            long sixth = log.seal();
            assertEquals(-1, log.floor("t", 3));
            assertEquals(-1, log.floor("t", 2), "the re-made row's death record went too");
            assertEquals(0, log.tombstones());
            assertEquals(fourth, log.forgottenUpTo(), "the newest forgotten deletion's tick");
            // Id 3 is gone from the record; id 2 (stored again) stays, stamped by its last change.
            assertArrayEquals(new long[] {1, 2}, all(log, 0, sixth));
            assertEquals(2, log.entries());
        }
    }

    @Test
    void aDeletionNeverRemovesANewerRow() {
        try (ParameterServer ps = ParameterServer.follower(PsConfig.defaults())) {
            SparseTable s = ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            long rowBytes = RowTransfer.rowBytes(s);
            MemorySegment row = MemorySegment.ofArray(new byte[(int) rowBytes]);
            row.set(RowLayout.LONG, RowLayout.ID_OFFSET, 9L);
            row.set(RowLayout.LONG, RowLayout.STEPS_OFFSET, 8L);
            assertEquals(1, RowTransfer.merge(s, row));
            assertFalse(RowTransfer.delete(s, 9, 7), "a row with more steps than the deleted copy stays");
            assertEquals(8, ExportRows.steps(s, 9));
            assertTrue(RowTransfer.delete(s, 9, 8), "a copy with at most the floor's steps goes");
            assertEquals(-1, ExportRows.steps(s, 9));
            assertEquals(0, s.rows());
            assertFalse(RowTransfer.delete(s, 9, 8), "deleting an absent row is harmless");
            // A pull of the deleted id answers the initializer's values, storing nothing (read-only).
            float[] out = new float[DIM];
            Arrays.fill(out, 5f);
            ps.pull("t", DIM, new long[] {9}, 0, 1, MemorySegment.ofArray(out));
            assertArrayEquals(new float[DIM], out);
            assertEquals(0, s.rows());
        }
    }

    @Test
    void denseTensorsAreStampedByTheirLastStep() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            DenseTensor d = ps.createDense(new DenseConfig("w", 8, Optimizer.sgd(1), Initializer.zeros()));
            ExportLog log = new ExportLog(ps);
            assertEquals(-1, log.denseTick("w"));
            long first = log.seal();
            assertEquals(first, log.denseTick("w"), "picked up as it is, in the first tick");
            long second = log.seal();
            assertEquals(first, log.denseTick("w"), "unchanged");
            d.apply(MemorySegment.ofArray(new float[8]));
            assertEquals(second + 1, log.denseTick("w"), "a step is stamped with the open tick");
            assertEquals(java.util.List.of("w"), log.denseNames());
            assertTrue(log.denseTensor("w") == d);
        }
    }
}
