package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * The reads of a {@link SparseTable}'s pull ({@link SparseTable#gather}, which checks the request
 * first): rows out into the caller's segment without the shard locks, each copy validated by its
 * shard's version (the seqlock of {@link Shard}), read again when a write raced with it, and read
 * under the shard's lock when the row must be created or keeps changing. Its own state is final,
 * set at construction; the rows are the shards', guarded by their locks; its working arrays are
 * per thread ({@link Scratch}). Any number of threads at once.
 */
final class OptimisticGather {

    /** Optimistic reads of one row before a gather takes its shard's lock instead. */
    private static final int OPTIMISTIC_ATTEMPTS = 3;
    /** {@link Shard#find}'s answer for an absent id. */
    private static final int ABSENT = RowAdmission.ABSENT;
    /** Not looked up: a write was under way. */
    private static final int RETRY = -2;

    private final SparseTable table;
    private final Shard[] shards;
    private final OptimizerKernel kernel;
    private final RowAdmission admission;
    private final boolean readOnly;
    private final int dimension;
    private final long payloadBytes;

    OptimisticGather(SparseTable table, Shard[] shards, OptimizerKernel kernel, RowAdmission admission,
            boolean readOnly) {
        this.table = table;
        this.shards = shards;
        this.kernel = kernel;
        this.admission = admission;
        this.readOnly = readOnly;
        this.dimension = table.dimension();
        this.payloadBytes = (long) dimension * Float.BYTES;
    }

    /**
     * Writes the weights of {@code ids[offset, offset + count)} to {@code out} as
     * {@link SparseTable#gather} says, which has checked the request.
     */
    void gather(long[] ids, int offset, int count, MemorySegment out) {
        Scratch scratch = Scratch.of(Math.min(count, Scratch.GATHER_CHUNK));
        for (int from = 0; from < count; from += Scratch.GATHER_CHUNK) {
            gatherChunk(ids, offset + from, Math.min(Scratch.GATHER_CHUNK, count - from), out,
                    from * payloadBytes, scratch);
        }
    }

    /**
     * Gathers without the shard locks, in three passes: the row of every id (so that the index
     * lookups' cache misses overlap); each found row's copy, validated against its shard's
     * version ({@link Shard}), in one short loop (so that the rows' misses overlap too); then the
     * ids that loop left: a row written meanwhile is read again, and a row that is absent (to be
     * created) or keeps changing is read under its shard's lock.
     */
    private void gatherChunk(long[] ids, int offset, int count, MemorySegment out, long outAt, Scratch scratch) {
        long[] hash = scratch.hash;
        long[] version = scratch.version;
        int[] rowOf = scratch.row;
        int[] left = scratch.order;
        Shard[] shards = this.shards;
        int mask = shards.length - 1;
        for (int i = 0; i < count; i++) {
            long id = ids[offset + i];
            long h = Slots.mix(id);
            Shard shard = shards[(int) (h >>> 40) & mask];
            long v = shard.readVersion();
            hash[i] = h;
            version[i] = v;
            rowOf[i] = (v & 1) == 0 ? findQuietly(shard, id, h) : RETRY;
        }
        int lefts = 0;
        for (int i = 0; i < count; i++) {
            Shard shard = shards[(int) (hash[i] >>> 40) & mask];
            int row = rowOf[i];
            if (row < 0 || !shard.copyQuietly(row, out, outAt + i * payloadBytes, payloadBytes)
                    || !shard.validate(version[i])) {
                left[lefts++] = i;
            }
        }
        for (int k = 0; k < lefts; k++) {
            int i = left[k];
            gatherAgain(ids[offset + i], hash[i], shards[(int) (hash[i] >>> 40) & mask], rowOf[i], version[i], out,
                    outAt + i * payloadBytes);
        }
    }

    /** One id that the optimistic pass left: read again (a few attempts), else under the lock. */
    private void gatherAgain(long id, long h, Shard shard, int row, long v, MemorySegment out, long at) {
        for (int attempt = 1;; attempt++) {
            if (row == ABSENT && shard.validate(v)) {
                if (readOnly) {
                    kernel.initWeights(id, dimension, out, at);
                    return;
                }
                break; // it is created under the lock
            }
            if (attempt == OPTIMISTIC_ATTEMPTS) {
                break;
            }
            v = shard.readVersion();
            row = (v & 1) == 0 ? findQuietly(shard, id, h) : RETRY;
            if (row >= 0 && shard.copyQuietly(row, out, at, payloadBytes) && shard.validate(v)) {
                return;
            }
        }
        gatherLocked(shard, id, h, out, at);
    }

    private static int findQuietly(Shard shard, long id, long hash) {
        try {
            return shard.find(id, hash);
        } catch (IllegalStateException | IndexOutOfBoundsException closedMeanwhile) {
            return RETRY;
        }
    }

    private void gatherLocked(Shard shard, long id, long hash, MemorySegment out, long at) {
        shard.lock.lock();
        try {
            table.checkOpenLocked(shard);
            int row = shard.find(id, hash);
            if (row < 0) {
                row = readOnly ? ABSENT : admission.admitAndCreate(shard, id, hash, table.now());
                if (row < 0) {
                    kernel.initWeights(id, dimension, out, at);
                    return;
                }
            }
            MemorySegment.copy(shard.chunk(row), shard.weightsAt(row), out, at, payloadBytes);
        } finally {
            shard.lock.unlock();
        }
    }
}
