package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.LongAdder;

/**
 * The optimizer steps of a push ({@link SparseTable#apply}, which has checked the request and its
 * gradients), in two phases per shard under the shard's lock: every row found or created first,
 * so that a full table fails before any step; then the steps, in batch order within a shard, each
 * one write for the optimistic readers, with the rows' cache lines prefetched ahead of their
 * steps ({@link LinePrefetch}; read in groups just before them where it is off). Stateless
 * between calls (its working arrays are the thread's {@link Scratch}).
 */
final class PushSteps {

    private final SparseTable table;
    private final Shard[] shards;
    private final OptimizerKernel kernel;
    private final RowAdmission admission;
    private final long payloadBytes;
    /** Whole cache lines of a gradient row ({@link #preloadGradients}, {@link #prefetchRows}). */
    private final int gradientLines;
    /** Steps dropped because the evictor deleted their row between the two phases. */
    private final LongAdder lostToEviction;

    PushSteps(SparseTable table, Shard[] shards, OptimizerKernel kernel, RowAdmission admission,
            LongAdder lostToEviction) {
        this.table = table;
        this.shards = shards;
        this.kernel = kernel;
        this.admission = admission;
        this.payloadBytes = (long) table.dimension() * Float.BYTES;
        this.gradientLines = (int) (payloadBytes / 64);
        this.lostToEviction = lostToEviction;
    }

    /**
     * Rows of a push whose cache lines are touched together before their steps: enough for the
     * misses of rows out of cache to overlap, few enough for rows in cache to stay in the first
     * level (16 Adam rows are 13 KiB) until their steps. Measured: groups of 16 against a whole
     * shard's rows at once, Adagrad on rows in cache 1.20-1.25 against 1.30-1.37 ns per element,
     * the 4,096-id push within noise (452 against 470 us); groups of 64 no better.
     */
    static final int TOUCH_GROUP = 16;

    /**
     * One optimizer step per id of {@code ids[offset, offset + count)} with the gradient row at
     * byte {@code i * dimension * 4} of {@code gradients}, as {@link SparseTable#apply} says.
     */
    void apply(long[] ids, int offset, int count, MemorySegment gradients) {
        Scratch scratch = Scratch.of(count);
        int[] start = group(ids, offset, count, scratch);
        int[] order = scratch.order;
        long[] hash = scratch.hash;
        int[] rowOf = scratch.row;
        long[] entryId = scratch.entryId;
        long[] entryRef = scratch.entryRef;
        MemorySegment[] chunkOf = scratch.chunk;
        long[] weightsAt = scratch.at;
        long[] recordAt = scratch.recordAt;
        long now = table.now();
        if (LinePrefetch.ENABLED) {
            Shard.prefetchHomes(shards, start, order, hash, scratch.spans(count));
        }
        // Phase 1: find or create every row, so that a full table fails before any step; the home
        // index entries of a shard's ids are read first, in a loop of loads only, so that their
        // cache misses overlap, and each row's chunk and offsets are kept for phase 2.
        for (int s = 0; s < shards.length; s++) {
            if (start[s] == start[s + 1]) {
                continue;
            }
            Shard shard = shards[s];
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                shard.readHomes(order, start[s], start[s + 1], hash, entryId, entryRef);
                for (int k = start[s]; k < start[s + 1]; k++) {
                    int pos = order[k];
                    long id = ids[offset + pos];
                    // A home entry holding the id names its row (creations in this loop do not
                    // move rows); any other entry, read before them, is looked up again.
                    int row = entryRef[pos] != 0 && entryId[pos] == id ? (int) (entryRef[pos] - 1)
                            : shard.find(id, hash[pos]);
                    if (row < 0) {
                        row = admission.admitAndCreate(shard, id, hash[pos], now);
                    }
                    rowOf[pos] = row;
                    if (row >= 0) {
                        shard.locate(row, pos, chunkOf, weightsAt, recordAt);
                    } else {
                        chunkOf[pos] = null;
                    }
                }
            } finally {
                shard.lock.unlock();
            }
        }
        // Phase 2: the steps, in batch order within each shard (so duplicates apply in order),
        // each one write for the optimistic readers. The rows' lines (from the offsets phase 1
        // kept) are prefetched PREFETCH_AHEAD rows ahead of the steps; without the prefetch,
        // one load per cache line of each group of TOUCH_GROUP rows before their steps, in a loop
        // of loads only: a step's work depends on its row's loads and fills the processor's
        // window, so without either the rows' misses come one after another.
        int dimension = table.dimension();
        long touched = 0;
        boolean prefetch = LinePrefetch.ENABLED;
        // A heap segment's address() is an offset into its array, not where its lines are: the
        // gradients of a heap array are touched per group instead of prefetched.
        boolean touchGradients = !prefetch || !gradients.isNative();
        boolean callPerRow = callPerRow(!touchGradients);
        LineSpans spans = prefetch ? scratch.spans(PREFETCH_BATCH * 3) : null;
        int prefetched = 0;
        for (int s = 0; s < shards.length; s++) {
            if (start[s] == start[s + 1]) {
                continue;
            }
            Shard shard = shards[s];
            shard.lock.lock();
            try {
                table.checkOpenLocked(shard);
                for (int from = start[s], end = start[s + 1]; from < end; from += TOUCH_GROUP) {
                    int to = Math.min(end, from + TOUCH_GROUP);
                    if (!prefetch) {
                        touched += preload(shard, order, chunkOf, weightsAt, recordAt, from, to);
                    }
                    if (touchGradients) {
                        touched += preloadGradients(order, gradients, payloadBytes, gradientLines, from, to);
                    }
                    for (int k = from; k < to; k++) {
                        if (prefetch && prefetched - k < PREFETCH_AHEAD && prefetched < count) {
                            prefetched = prefetchRows(shard, order, chunkOf, weightsAt, recordAt, gradients,
                                    !touchGradients, callPerRow, prefetched, count, spans);
                        }
                        int pos = order[k];
                        int row = rowOf[pos];
                        if (row < 0) {
                            continue; // not admitted: counted, not stored
                        }
                        long id = ids[offset + pos];
                        if (!shard.holdsAt(chunkOf[pos], recordAt[pos], id)) {
                            // Evicted since phase 1 (its slot maybe reused): the step is lost with
                            // the row, as if it had been applied just before the eviction.
                            row = shard.find(id, hash[pos]);
                            if (row < 0) {
                                lostToEviction.increment();
                                continue;
                            }
                            shard.locate(row, pos, chunkOf, weightsAt, recordAt);
                        }
                        shard.beginWrite();
                        try {
                            shard.stepAt(chunkOf[pos], weightsAt[pos], recordAt[pos], kernel, dimension, gradients,
                                    pos * payloadBytes, now);
                        } finally {
                            shard.endWrite();
                        }
                        RowListener listener = table.listener();
                        if (listener != null) {
                            listener.changed(id);
                        }
                    }
                }
            } finally {
                shard.lock.unlock();
            }
        }
        scratch.touched = touched;
        Arrays.fill(chunkOf, 0, count, null);
    }

    /**
     * All of memory, for the push's touches: each row's lines read at their addresses, without a
     * segment's class, liveness and bounds checks per load (nine loads a row, in chunks that differ
     * row to row, so nothing could be hoisted; and once the JIT's profiled predicates trip in
     * warm-up, the checks are each a branch again). Read only under the row's shard lock, after
     * {@link SparseTable#checkOpenLocked}: a shard's rows are freed only by its close, under that lock.
     */
    private static final MemorySegment ALL_MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    /**
     * One load per cache line of the weights and the record of each row of {@code order[from, to)}
     * (null chunk: no row), from the chunks and offsets phase 1 found, summed. Under the shard's lock.
     */
    private static long preload(Shard shard, int[] order, MemorySegment[] chunkOf, long[] weightsAt, long[] recordAt,
            int from, int to) {
        assert shard.lock.isHeldByCurrentThread() && !shard.closed();
        int weightLines = shard.weightLines();
        int recordLines = shard.recordLines();
        long touched = 0;
        for (int k = from; k < to; k++) {
            int pos = order[k];
            MemorySegment chunk = chunkOf[pos];
            if (chunk != null) {
                long base = chunk.address();
                touched += Shard.preloadLines(ALL_MEMORY, base + weightsAt[pos], weightLines)
                        + Shard.preloadLines(ALL_MEMORY, base + recordAt[pos], recordLines);
            }
        }
        return touched;
    }

    /**
     * Rows a push keeps prefetched ahead of its step ({@link LinePrefetch}), and how many it asks
     * for in one call. Measured (4,096-id Adagrad push, us, best / median): 16 and 4: 282 / 296,
     * 293 / 306; 8 and 4: 309 / 313; 24 and 4: 304 / 312; 32 and 8: 290 / 303; 16 and 2: 315 / 320;
     * 16 and 8: 302 / 307; touches of groups of 16 instead: 341-350 / 342-357.
     */
    static final int PREFETCH_AHEAD = 16;
    static final int PREFETCH_BATCH = 4;

    /**
     * Whether {@link #prefetchRows} prefetches each row in a call of its own: when
     * {@link #PREFETCH_BATCH} rows would pass {@link LinePrefetch#CALL_LINES} lines (rows of
     * thousands of weights; not the measured Adagrad rows of 64 weights, 13 lines).
     */
    private boolean callPerRow(boolean withGradients) {
        Shard any = shards[0];
        long rowLines = any.weightLines() + any.recordLines() + (withGradients ? gradientLines : 0);
        return rowLines * PREFETCH_BATCH > LinePrefetch.CALL_LINES;
    }

    /**
     * Prefetches the weights, record and (if {@code withGradients}) gradient lines of the rows of
     * {@code order[from, ...)}, {@link #PREFETCH_BATCH} positions of the batch (null chunk: only
     * the gradients), in one call or one per row ({@code callPerRow}); returns the next position
     * to prefetch. Rows of later shards are prefetched before their shard's lock is taken: their
     * chunks and offsets are phase 1's, and a prefetch of a line freed meanwhile is ignored by the
     * processor.
     */
    private int prefetchRows(Shard shard, int[] order, MemorySegment[] chunkOf, long[] weightsAt, long[] recordAt,
            MemorySegment gradients, boolean withGradients, boolean callPerRow, int from, int count, LineSpans spans) {
        int to = Math.min(count, from + PREFETCH_BATCH);
        int weightLines = shard.weightLines();
        int recordLines = shard.recordLines();
        long gradientsAt = gradients.address();
        long[] pairs = spans.pairs;
        int n = 0;
        for (int k = from; k < to; k++) {
            int pos = order[k];
            MemorySegment chunk = chunkOf[pos];
            if (chunk != null) {
                long base = chunk.address();
                pairs[n++] = base + weightsAt[pos];
                pairs[n++] = weightLines;
                pairs[n++] = base + recordAt[pos];
                pairs[n++] = recordLines;
            }
            if (withGradients) {
                pairs[n++] = gradientsAt + pos * payloadBytes;
                pairs[n++] = gradientLines;
            }
            if (callPerRow) {
                LinePrefetch.spans(spans, n >> 1);
                n = 0;
            }
        }
        if (n > 0) {
            LinePrefetch.spans(spans, n >> 1);
        }
        return to;
    }

    /**
     * One load per whole cache line of the gradients of each row of {@code order[from, to)}: a
     * push's gradient rows are read in shard order, at random positions of a request that the
     * rows' own lines push out of the first levels. A partial last line (dimensions not a multiple
     * of 16) is left to the step. Measured: Adagrad on rows in cache 1.03 / 1.03 against 1.08 /
     * 1.10 ns per weight; the 1M-row push within its noise.
     */
    private static long preloadGradients(int[] order, MemorySegment gradients, long payloadBytes, int lines, int from,
            int to) {
        if (lines == 0) {
            return 0;
        }
        long touched = 0;
        for (int k = from; k < to; k++) {
            touched += Shard.preloadLines(gradients, order[k] * payloadBytes, lines);
        }
        return touched;
    }

    /**
     * Groups the positions of a batch by shard, in batch order within a shard, into
     * {@code scratch.order}, with each position's hash in {@code scratch.hash}; returns where each
     * shard's positions start ({@code shards + 1} entries). The gather has a copy of its own
     * ({@code OptimisticGather.groupByShard}): one method shared by both, its loops compiled with
     * both callers' profiles, made the 4,096-id push 381-386 us against 344-357 (two alternating
     * rounds).
     */
    private int[] group(long[] ids, int offset, int count, Scratch scratch) {
        long[] hash = scratch.hash;
        int[] shardOf = scratch.row;
        int[] order = scratch.order;
        int[] start = scratch.shardStart;
        Arrays.fill(start, 0, shards.length + 1, 0);
        int mask = shards.length - 1;
        for (int i = 0; i < count; i++) {
            long h = Slots.mix(ids[offset + i]);
            hash[i] = h;
            int s = (int) (h >>> 40) & mask;
            shardOf[i] = s;
            start[s + 1]++;
        }
        for (int s = 0; s < shards.length; s++) {
            start[s + 1] += start[s];
        }
        int[] cursor = scratch.shardCursor;
        System.arraycopy(start, 0, cursor, 0, shards.length);
        for (int i = 0; i < count; i++) {
            order[cursor[shardOf[i]]++] = i;
        }
        return start;
    }
}
