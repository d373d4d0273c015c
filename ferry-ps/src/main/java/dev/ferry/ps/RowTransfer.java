package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import java.util.function.LongPredicate;

/**
 * Whole rows of a sparse table (weights, optimizer state and step count, {@link RowLayout}) for
 * moving them between servers: the row format of checkpoints, with the step count as the row's
 * version. Merging keeps, per id, the row with the most steps, so a snapshot and the rows
 * forwarded meanwhile can arrive in any order and more than once.
 */
public final class RowTransfer {

    private RowTransfer() {
    }

    /** Bytes of one whole row of {@code table}. */
    public static long rowBytes(SparseTable table) {
        return table.rowBytes();
    }

    /** The id of the row at {@code at}. */
    public static long idOf(MemorySegment rows, long at) {
        return rows.get(RowLayout.LONG, at + RowLayout.ID_OFFSET);
    }

    /** The step count (version) of the row at {@code at}. */
    public static long stepsOf(MemorySegment rows, long at) {
        return rows.get(RowLayout.LONG, at + RowLayout.STEPS_OFFSET);
    }

    /**
     * Hands {@code sink} the rows whose id {@code keep} accepts, shard by shard, in runs of whole
     * rows of at most {@code maxBytes} bytes; each shard is copied under its lock (one copy, as
     * for a checkpoint), so each run is a consistent cut of its rows. The segments are valid only
     * during the call.
     */
    public static void export(SparseTable table, LongPredicate keep, long maxBytes, Consumer<MemorySegment> sink) {
        export(table, keep, maxBytes, null, sink);
    }

    /**
     * {@link #export(SparseTable, LongPredicate, long, Consumer)}, holding {@code perShard} (if not
     * null) from the copy of each shard until {@code sink} has taken its last run: so that whoever
     * also takes it sees each shard's rows copied and handed on either wholly before or wholly after.
     */
    public static void export(SparseTable table, LongPredicate keep, long maxBytes, Lock perShard,
            Consumer<MemorySegment> sink) {
        long rowBytes = table.rowBytes();
        long perRun = Math.max(1, maxBytes / rowBytes) * rowBytes;
        for (int s = 0; s < table.shardCount(); s++) {
            if (perShard != null) {
                perShard.lock();
            }
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment shard = table.wholeRows().snapshotShard(s, arena);
                MemorySegment run = arena.allocate(perRun, Long.BYTES);
                long filled = 0;
                for (long at = 0; at < shard.byteSize(); at += rowBytes) {
                    if (keep.test(idOf(shard, at))) {
                        MemorySegment.copy(shard, at, run, filled, rowBytes);
                        filled += rowBytes;
                        if (filled == perRun) {
                            sink.accept(run.asSlice(0, filled));
                            filled = 0;
                        }
                    }
                }
                if (filled > 0) {
                    sink.accept(run.asSlice(0, filled));
                }
            } finally {
                if (perShard != null) {
                    perShard.unlock();
                }
            }
        }
    }

    /** Copies the whole rows of {@code ids[0, count)} into {@code out} ({@code count} rows). */
    public static void copy(SparseTable table, long[] ids, int count, MemorySegment out) {
        table.wholeRows().copy(ids, count, out, true);
    }

    /**
     * Copies the whole rows of those of {@code ids[0, count)} the table stores into {@code out}
     * (room for {@code count} rows), back to back; absent ids are skipped and not created.
     * Returns the rows copied.
     */
    public static int copyPresent(SparseTable table, long[] ids, int count, MemorySegment out) {
        return table.wholeRows().copy(ids, count, out, false);
    }

    /**
     * Merges whole rows: per id the one with more steps wins (ties: the incoming one).
     *
     * @throws PsException {@code LENGTH_MISMATCH} if {@code rows} is not whole rows of this table
     */
    public static int merge(SparseTable table, MemorySegment rows) {
        if (rows.byteSize() % table.rowBytes() != 0) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, rows.byteSize() + " bytes are not whole rows of "
                    + table.rowBytes() + " bytes of table '" + table.name() + "'");
        }
        return table.wholeRows().merge(rows);
    }

    /**
     * Deletes the row of {@code id} if it has at most {@code floor} steps (a deletion on another
     * server, the deleted row having had {@code floor} steps): a newer row stays. Returns whether it
     * deleted a row.
     */
    public static boolean delete(SparseTable table, long id, long floor) {
        return table.wholeRows().removeIfNotNewer(id, floor);
    }

    /**
     * Deletes the rows whose id {@code delete} accepts, whatever their step counts (a follower's
     * sweep of rows the training server no longer has); returns how many.
     */
    public static int deleteIf(SparseTable table, LongPredicate delete) {
        return table.wholeRows().removeIf(delete);
    }

    /** Resets the rows whose id {@code reset} accepts to their initial values; returns how many. */
    public static int reset(SparseTable table, LongPredicate reset) {
        return table.wholeRows().reset(reset);
    }
}
