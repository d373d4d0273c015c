package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.TreeMap;

/** Test helpers for the live export: a table's whole rows by id, and the evictor's deletion of one row. */
public final class ExportRows {

    private ExportRows() {
    }

    /** Every stored row of {@code table}, whole (id, steps, weights, state), by id. */
    public static TreeMap<Long, byte[]> of(SparseTable table) {
        TreeMap<Long, byte[]> rows = new TreeMap<>();
        long rowBytes = table.rowBytes();
        RowTransfer.export(table, id -> true, 1 << 20, run -> {
            for (long at = 0; at < run.byteSize(); at += rowBytes) {
                rows.put(RowTransfer.idOf(run, at), run.asSlice(at, rowBytes).toArray(ValueLayout.JAVA_BYTE));
            }
        });
        return rows;
    }

    /** Steps of the row of {@code id}, or -1 if absent (nothing is created). */
    public static long steps(SparseTable table, long id) {
        MemorySegment out = MemorySegment.ofArray(new byte[(int) table.rowBytes()]);
        return RowTransfer.copyPresent(table, new long[] {id}, 1, out) == 0 ? -1 : RowTransfer.stepsOf(out, 0);
    }

    /**
     * Deletes the row of {@code id} as the evictor does (in one write, counted as evicted by TTL,
     * the table's listener told); returns whether it was stored.
     */
    public static boolean evict(SparseTable table, long id) {
        long hash = Slots.mix(id);
        Shard shard = table.shard(Slots.shardOfHash(hash, table.shardCount()));
        shard.lock.lock();
        try {
            int row = shard.find(id, hash);
            if (row < 0) {
                return false;
            }
            long steps = shard.steps(row);
            shard.beginWrite();
            try {
                shard.remove(row);
            } finally {
                shard.endWrite();
            }
            table.evicted(1, true);
            table.removed(id, steps);
            return true;
        } finally {
            shard.lock.unlock();
        }
    }
}
