package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

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
    /** Rows of {@link #PREFETCH_WINDOW_BYTES}: prefetched one window ahead of the copies. */
    private final int prefetchWindow;

    /**
     * The weights a gather prefetches ahead of its copies: the next window's rows are asked for
     * before the copies of this window's. Small enough to stay in the second level (1 MiB here)
     * with the window being copied; at dimension 64 a window is 1,024 rows, a whole server part of
     * the benchmarks. Measured, SGD rows, 1,024 distinct ids, ns per row: dimension 1,024: 207-214
     * against 261-265 with all rows prefetched at once (128 KiB: 208-218); dimension 256: 71-73
     * against 74-79; dimension 64: unchanged (39.9 against 39.8).
     */
    static final long PREFETCH_WINDOW_BYTES = 256 << 10;

    OptimisticGather(SparseTable table, Shard[] shards, OptimizerKernel kernel, RowAdmission admission,
            boolean readOnly) {
        this.table = table;
        this.shards = shards;
        this.kernel = kernel;
        this.admission = admission;
        this.readOnly = readOnly;
        this.dimension = table.dimension();
        this.payloadBytes = (long) dimension * Float.BYTES;
        this.prefetchWindow = (int) Math.max(16, PREFETCH_WINDOW_BYTES / payloadBytes);
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
     * Gathers without the shard locks, in passes that each leave the processor many rows' cache
     * misses to overlap (a pass whose work branches on each loaded value, or spends a hundred
     * instructions per row, keeps only a few under way):
     * <ol>
     *   <li>the ids grouped by shard (their hashes, a counting sort);
     *   <li>the home index entries of all the ids prefetched ({@link LinePrefetch}, where it is on);
     *   <li>per shard, its version, then the home index entry of each of its ids: loads only,
     *       from one index segment ({@link Shard#readHomes});
     *   <li>per id, its row (the home entry's, or {@link Shard#find} past it, the home line now in
     *       cache) and the row's chunk and offset;
     *   <li>every row's weights prefetched, or (without the prefetch) one load per cache line of
     *       them, so that the rows' misses overlap;
     *   <li>each row's copy (from cache now), then one validation per shard of its copies
     *       against its version ({@link Shard});
     *   <li>the ids that pass left: a row written meanwhile is read again, and a row that is
     *       absent (to be created) or keeps changing is read under its shard's lock.
     * </ol>
     */
    private void gatherChunk(long[] ids, int offset, int count, MemorySegment out, long outAt, Scratch scratch) {
        // One method per pass: each is compiled on its own, so a pass whose first run of a new
        // case (the first found rows after a table's rows were created by gathers) sends it back
        // to the interpreter is recompiled alone and soon, not the whole gather.
        int[] start = groupByShard(ids, offset, count, scratch);
        if (LinePrefetch.ENABLED) {
            Shard.prefetchHomes(shards, start, scratch.order, scratch.hash, scratch.spans(count));
        }
        readHomes(start, scratch);
        resolveRows(ids, offset, count, scratch);
        int window = count;
        if (LinePrefetch.ENABLED) {
            window = prefetchWindow;
            prefetchRows(0, Math.min(count, window), scratch);
        } else {
            scratch.touched = touchRows(count, scratch);
        }
        int lefts = copyRows(count, window, start, out, outAt, scratch);
        Arrays.fill(scratch.chunk, 0, count, null);
        long[] hash = scratch.hash;
        int[] left = scratch.order;
        int mask = shards.length - 1;
        for (int k = 0; k < lefts; k++) {
            int i = left[k];
            gatherAgain(ids[offset + i], hash[i], shards[(int) (hash[i] >>> 40) & mask], scratch.row[i],
                    scratch.version[i], out, outAt + i * payloadBytes);
        }
    }

    /**
     * Each id's hash to {@code scratch.hash} and shard to {@code scratch.row}; the positions
     * grouped by shard to {@code scratch.order}; returns where each shard's positions start.
     */
    private int[] groupByShard(long[] ids, int offset, int count, Scratch scratch) {
        long[] hash = scratch.hash;
        int[] shardOf = scratch.row;
        int[] order = scratch.order;
        int[] start = scratch.shardStart;
        int shardCount = shards.length;
        int mask = shardCount - 1;
        Arrays.fill(start, 0, shardCount + 1, 0);
        for (int i = 0; i < count; i++) {
            long h = Slots.mix(ids[offset + i]);
            int s = (int) (h >>> 40) & mask;
            hash[i] = h;
            shardOf[i] = s;
            start[s + 1]++;
        }
        for (int s = 0; s < shardCount; s++) {
            start[s + 1] += start[s];
        }
        int[] cursor = scratch.shardCursor;
        System.arraycopy(start, 0, cursor, 0, shardCount);
        for (int i = 0; i < count; i++) {
            order[cursor[shardOf[i]]++] = i;
        }
        return start;
    }

    /**
     * Per shard: its version to {@code scratch.version} of each of its ids, then their home index
     * entries; the ids of a shard under a write (or whose index was freed meanwhile) are marked
     * {@link #RETRY} in {@code scratch.row}.
     */
    private void readHomes(int[] start, Scratch scratch) {
        int[] order = scratch.order;
        long[] version = scratch.version;
        int[] rowOf = scratch.row;
        for (int s = 0; s < shards.length; s++) {
            int from = start[s];
            int to = start[s + 1];
            if (from == to) {
                continue;
            }
            Shard shard = shards[s];
            long v = shard.readVersion();
            boolean read = (v & 1) == 0;
            if (read) {
                try {
                    shard.readHomes(order, from, to, scratch.hash, scratch.entryId, scratch.entryRef);
                } catch (IllegalStateException | IndexOutOfBoundsException closedMeanwhile) {
                    read = false;
                }
            }
            for (int k = from; k < to; k++) {
                int i = order[k];
                version[i] = v;
                if (!read) {
                    rowOf[i] = RETRY;
                }
            }
        }
    }

    /**
     * Each id's row to {@code scratch.row} (the home entry's, or {@link Shard#find} past it; or
     * {@link #ABSENT}), and a found row's chunk and weights offset to {@code scratch.chunk} and
     * {@code scratch.at} (null chunk: nothing to copy).
     */
    private void resolveRows(long[] ids, int offset, int count, Scratch scratch) {
        int[] rowOf = scratch.row;
        long[] entryId = scratch.entryId;
        long[] entryRef = scratch.entryRef;
        MemorySegment[] chunkOf = scratch.chunk;
        long[] weightsAt = scratch.at;
        long[] hash = scratch.hash;
        for (int i = 0; i < count; i++) {
            // Loaded for every position, not behind the branch on RETRY: their range checks can
            // then leave the loop by plain loop predication, which a warm-up trap does not take away.
            int row = rowOf[i];
            long id = ids[offset + i];
            long ref = entryRef[i];
            long home = entryId[i];
            long h = hash[i];
            chunkOf[i] = null;
            if (row != RETRY) {
                Shard shard = shards[row]; // the shard, until the row is known
                if (ref == 0) {
                    row = ABSENT;
                } else if (home == id) {
                    row = (int) (ref - 1);
                } else {
                    row = findQuietly(shard, id, h);
                }
                if (row >= 0) {
                    shard.weightsQuietly(row, i, chunkOf, weightsAt);
                }
                rowOf[i] = row;
            }
        }
    }

    /**
     * Prefetches ({@link LinePrefetch}) the weights of the found rows of positions
     * {@code [first, end)}, a window of {@link #PREFETCH_WINDOW_BYTES}, whose lines the copies then
     * find in the second level or on their way (measured, 1,024 rows of 256 bytes: 45 against 77
     * ns per row with the touches below); in calls of at most {@link LinePrefetch#CALL_LINES} lines
     * (one call for rows of up to 4 lines).
     */
    private void prefetchRows(int first, int end, Scratch scratch) {
        MemorySegment[] chunkOf = scratch.chunk;
        long[] weightsAt = scratch.at;
        LineSpans spans = scratch.spans(end - first);
        long[] pairs = spans.pairs;
        int lines = shards[0].weightLines();
        int rowsPerCall = Math.max(1, LinePrefetch.CALL_LINES / lines);
        for (int from = first; from < end; from += rowsPerCall) {
            int n = 0;
            for (int i = from, to = Math.min(end, from + rowsPerCall); i < to; i++) {
                MemorySegment chunk = chunkOf[i];
                if (chunk != null) {
                    pairs[n++] = chunk.address() + weightsAt[i];
                    pairs[n++] = lines;
                }
            }
            LinePrefetch.spans(spans, n >> 1);
        }
    }

    /** One load per cache line of each found row's weights, summed, so that the rows' misses overlap. */
    private long touchRows(int count, Scratch scratch) {
        MemorySegment[] chunkOf = scratch.chunk;
        long[] weightsAt = scratch.at;
        int lines = shards[0].weightLines();
        long touched = 0;
        try {
            for (int i = 0; i < count; i++) {
                MemorySegment chunk = chunkOf[i];
                if (chunk != null) {
                    touched += Shard.preloadLines(chunk, weightsAt[i], lines);
                }
            }
        } catch (IllegalStateException | IndexOutOfBoundsException closedMeanwhile) {
            // the copies find it out
        }
        return touched;
    }

    /**
     * Copies each found row to {@code out}, in windows of {@code window} rows (with the prefetch
     * on, the next window's rows are prefetched before a window's copies), then validates each shard's copies at once against
     * its version (the copies all came after it was read); the positions left (not found, not
     * copied, or of a shard written meanwhile) go to {@code scratch.order}, their number returned.
     */
    private int copyRows(int count, int window, int[] start, MemorySegment out, long outAt, Scratch scratch) {
        MemorySegment[] chunkOf = scratch.chunk;
        long[] weightsAt = scratch.at;
        for (int from = 0; from < count; from += window) {
            int to = Math.min(count, from + window);
            if (to < count) {
                prefetchRows(to, Math.min(count, to + window), scratch);
            }
            for (int i = from; i < to; i++) {
                MemorySegment chunk = chunkOf[i];
                if (chunk != null && !copyQuietly(chunk, weightsAt[i], out, outAt + i * payloadBytes)) {
                    chunkOf[i] = null;
                }
            }
        }
        int[] order = scratch.order;
        long[] version = scratch.version;
        int[] valid = scratch.shardCursor; // free after the grouping: 1 for a shard whose copies are whole
        for (int s = 0; s < shards.length; s++) {
            valid[s] = start[s] < start[s + 1] && shards[s].validate(version[order[start[s]]]) ? 1 : 0;
        }
        long[] hash = scratch.hash;
        int[] left = order;
        int mask = shards.length - 1;
        int lefts = 0;
        for (int i = 0; i < count; i++) {
            if (chunkOf[i] == null || valid[(int) (hash[i] >>> 40) & mask] == 0) {
                left[lefts++] = i;
            }
        }
        return lefts;
    }

    /** Copies a row's weights from {@code chunk} without the lock; false if the chunk was freed meanwhile. */
    private boolean copyQuietly(MemorySegment chunk, long from, MemorySegment out, long at) {
        try {
            MemorySegment.copy(chunk, from, out, at, payloadBytes);
            return true;
        } catch (IllegalStateException closedMeanwhile) {
            return false;
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
