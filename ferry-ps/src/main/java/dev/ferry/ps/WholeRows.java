package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.LongPredicate;

/**
 * Whole rows of a {@link SparseTable} ({@link RowLayout}: id, step count, weights, optimizer
 * state) in and out, for checkpoints, slot moves, replication and the live export
 * ({@link RowTransfer}, {@link Checkpoints}): shard snapshots and loads, merges by step count,
 * resets, copies and deletions. Each row is read or written under its shard's lock, and each
 * write is one write for the table's optimistic readers. Any thread.
 */
final class WholeRows {

    private final SparseTable table;
    private final Shard[] shards;
    private final long rowBytes;
    private final RowAdmission admission;

    WholeRows(SparseTable table, Shard[] shards, long rowBytes, RowAdmission admission) {
        this.table = table;
        this.shards = shards;
        this.rowBytes = rowBytes;
        this.admission = admission;
    }

    /** The whole row of {@code id} as bytes, or null; for tests. */
    byte[] raw(long id) {
        long hash = Slots.mix(id);
        Shard shard = shards[Slots.shardOfHash(hash, shards.length)];
        shard.lock.lock();
        try {
            table.checkOpenLocked(shard);
            int row = shard.find(id, hash);
            if (row < 0) {
                return null;
            }
            byte[] bytes = new byte[(int) rowBytes];
            shard.readRow(row, MemorySegment.ofArray(bytes), 0);
            return bytes;
        } finally {
            shard.lock.unlock();
        }
    }

    /** A consistent copy of one shard's rows, taken under its lock (held for one copy). */
    MemorySegment snapshotShard(int s, Arena arena) {
        Shard shard = shards[s];
        shard.lock.lock();
        try {
            table.checkOpenLocked(shard);
            return shard.snapshot(arena);
        } finally {
            shard.lock.unlock();
        }
    }

    /**
     * Adds the rows of a checkpoint file to shard {@code s}, byte for byte.
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} if a row belongs to another shard, repeats an
     *                     id, or the table would exceed its capacity
     */
    void loadShard(int s, MemorySegment data, String source) {
        if (data.byteSize() % rowBytes != 0) {
            throw SparseTable.corrupt(source, data.byteSize() + " bytes of rows is not a multiple of the row size "
                    + rowBytes);
        }
        Shard shard = shards[s];
        long now = table.now();
        shard.lock.lock();
        shard.beginWrite();
        try {
            for (long at = 0; at < data.byteSize(); at += rowBytes) {
                long id = data.get(RowLayout.LONG, at + RowLayout.ID_OFFSET);
                long hash = Slots.mix(id);
                if (Slots.shardOfHash(hash, shards.length) != s) {
                    throw SparseTable.corrupt(source, "row " + at / rowBytes + " (id " + id + ") belongs to shard "
                            + Slots.shardOfHash(hash, shards.length) + ", not " + s);
                }
                if (shard.find(id, hash) >= 0) {
                    throw SparseTable.corrupt(source, "id " + id + " appears twice");
                }
                if (!admission.countLoaded()) {
                    throw SparseTable.corrupt(source, "more rows than the table's capacity "
                            + table.config().maxRows());
                }
                if (data.get(RowLayout.LONG, at + RowLayout.STEPS_OFFSET) < 0) {
                    throw SparseTable.corrupt(source, "row " + at / rowBytes + " (id " + id
                            + ") has a negative step count");
                }
                int row = shard.append(id, hash);
                shard.writeRow(row, data, at);
                shard.touch(row, now);
            }
        } finally {
            shard.endWrite();
            shard.lock.unlock();
        }
    }

    /**
     * Puts whole rows (as {@link #snapshotShard} copies them) where they are not older: a row
     * replaces the table's copy of its id if its step count is at least the table's, and is added
     * if the id is absent. Rows moved between servers merge this way in any order. Returns the
     * rows written.
     *
     * @throws TableFullException if a new row was needed beyond the capacity
     */
    int merge(MemorySegment rows) {
        int written = 0;
        for (long at = 0; at + rowBytes <= rows.byteSize(); at += rowBytes) {
            long id = rows.get(RowLayout.LONG, at + RowLayout.ID_OFFSET);
            long steps = rows.get(RowLayout.LONG, at + RowLayout.STEPS_OFFSET);
            long hash = Slots.mix(id);
            Shard shard = shards[Slots.shardOfHash(hash, shards.length)];
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                int row = shard.find(id, hash);
                if (row < 0) {
                    row = admission.create(shard, id, hash);
                } else if (shard.steps(row) > steps) {
                    continue;
                }
                shard.beginWrite();
                try {
                    shard.writeRow(row, rows, at);
                    shard.touch(row, table.now());
                } finally {
                    shard.endWrite();
                }
                written++;
                RowListener listener = table.listener();
                if (listener != null) {
                    listener.changed(id);
                }
            } finally {
                shard.lock.unlock();
            }
        }
        return written;
    }

    /** Resets the rows whose id {@code reset} accepts to their initial values, step count 0; returns how many. */
    int reset(LongPredicate reset) {
        int n = 0;
        for (Shard shard : shards) {
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                for (int row = 0; row < shard.rows(); row++) {
                    if (!shard.live(row)) {
                        continue;
                    }
                    long id = shard.id(row);
                    if (reset.test(id)) {
                        shard.beginWrite();
                        try {
                            admission.initStored(shard, row, id, true);
                        } finally {
                            shard.endWrite();
                        }
                        n++;
                    }
                }
            } finally {
                shard.lock.unlock();
            }
        }
        return n;
    }

    /**
     * Copies the whole rows of {@code ids[0, count)} to {@code out}, back to back, each under its
     * shard's lock (so whole); an absent id is created if {@code createAbsent}, else skipped.
     * Returns how many rows were copied; {@code out} must hold {@code count} rows.
     */
    int copy(long[] ids, int count, MemorySegment out, boolean createAbsent) {
        int copied = 0;
        for (int i = 0; i < count; i++) {
            long hash = Slots.mix(ids[i]);
            Shard shard = shards[Slots.shardOfHash(hash, shards.length)];
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                int row = shard.find(ids[i], hash);
                if (row < 0 && createAbsent) {
                    row = admission.create(shard, ids[i], hash);
                    shard.touch(row, table.now());
                }
                if (row >= 0) {
                    shard.readRow(row, out, copied * rowBytes);
                    copied++;
                }
            } finally {
                shard.lock.unlock();
            }
        }
        return copied;
    }

    /**
     * Deletes the row of {@code id} if it has at most {@code floor} steps (a deletion exported by
     * training: a newer row stays), in one write for the optimistic readers; returns whether it did.
     */
    boolean removeIfNotNewer(long id, long floor) {
        long hash = Slots.mix(id);
        Shard shard = shards[Slots.shardOfHash(hash, shards.length)];
        shard.lock.lock();
        try {
            table.checkOpenLocked(shard);
            int row = shard.find(id, hash);
            if (row < 0 || shard.steps(row) > floor) {
                return false;
            }
            shard.beginWrite();
            try {
                shard.remove(row);
            } finally {
                shard.endWrite();
            }
            admission.removed(1);
            return true;
        } finally {
            shard.lock.unlock();
        }
    }

    /**
     * Deletes every row whose id {@code delete} accepts, each in one write for the optimistic
     * readers, shard by shard under its lock; returns how many. For a follower's sweep after a
     * full catch-up: the rows the training server no longer has.
     */
    int removeIf(LongPredicate delete) {
        int n = 0;
        for (Shard shard : shards) {
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                int here = 0;
                for (int row = 0; row < shard.rows(); row++) {
                    if (shard.live(row) && delete.test(shard.id(row))) {
                        shard.beginWrite();
                        try {
                            shard.remove(row);
                        } finally {
                            shard.endWrite();
                        }
                        here++;
                    }
                }
                admission.removed(here);
                n += here;
            } finally {
                shard.lock.unlock();
            }
        }
        return n;
    }
}
