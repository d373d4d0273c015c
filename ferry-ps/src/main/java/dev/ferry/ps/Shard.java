package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One lock stripe of a sparse table: an open-addressing hash index from id to row number
 * ({@link ShardIndex}), and the rows themselves ({@link RowLayout}) in off-heap chunks that never
 * move.
 *
 * <pre>
 *  index (power-of-two entries, linear probing, at most 3/8 or 5/8)   rows (append-only chunks)
 *  +-----------+-------------+                                        chunk 0: weights of rows 0..b-1, records of rows 0..b-1
 *  | id  i64   | row + 1 i64 |  row + 1 == 0: empty entry  ------->   chunk 1: weights of rows b.., records of rows b..
 *  +-----------+-------------+
 * </pre>
 * A chunk keeps its rows' weights apart from their records (id, step count, last-update stamp,
 * optimizer state; {@link StoredRow}), so a gather reads only weights; {@link #readRow} and
 * {@link #writeRow} convert to the {@link RowLayout} form of checkpoints and moves. Row slots
 * never move, so growing the index rehashes only the 16-byte entries (the ids are read back
 * from the records). A deleted row ({@link #remove}, by the evictor) leaves the index by
 * backward-shift deletion (no tombstones: probes stay as short as before) and its slot goes on a
 * free list that {@link #append} takes from before it grows; a free slot holds step count
 * {@link #FREE_STEPS} and is skipped by snapshots, so the row memory is bounded by the most rows
 * the shard ever held at once. Each record's {@link #stamp} keeps the time of the row's last
 * update (creation or optimizer step), for eviction. Chunks double from about 256 KiB
 * (small tables stay small) up to the first size of at least 2 MiB, then stay there; those, and
 * indexes of 2 MiB or more, are mapped for transparent huge pages ({@link RowMemory}):
 * <pre>
 *  chunk  0     1      2       ...  g-1            g, g+1, ...
 *  rows   b     2b     4b           b 2^(g-1)      b 2^g each (>= 2 MiB, huge pages)
 * </pre>
 *
 * <p>Writers hold {@link #lock}; every method but the optimistic readers is called with it held.
 * Readers may instead read without the lock, as a seqlock: {@link #readVersion}, then
 * {@link #find} and the row's bytes, then {@link #validate}. Writers make the version odd
 * ({@link #beginWrite}) before they touch a row or the index and even again after
 * ({@link #endWrite}), so a reader that sees the same even version before and after read a whole
 * row between two writes, never a torn one. An unvalidated read never touches freed memory: row
 * chunks never move, and the index generation that a rehash replaces is freed by closing its
 * shared arena, after which a reader still on it fails with {@link IllegalStateException}
 * (the Foreign Memory API's guarantee for shared arenas) and reads again. After {@link #close}
 * reads fail the same way or find no chunk.
 *
 * <p>The row chunks and each generation of the index come from shared arenas that this shard
 * owns (the index's through its {@link ShardIndex}) and closes. The free list is an on-heap
 * array guarded by {@link #lock} (asserted), read and written by no one without it; the records'
 * stamps likewise.
 */
final class Shard {

    private static final VarHandle VERSION;

    static {
        try {
            VERSION = MethodHandles.lookup().findVarHandle(Shard.class, "version", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Rows per chunk are chosen so that a chunk is at most 256 KiB: small tables stay small. */
    private static final long CHUNK_TARGET_BYTES = 256 << 10;

    /** The step count that marks a free slot (a real row counts steps from 0). */
    static final long FREE_STEPS = -1;

    final ReentrantLock lock = new ReentrantLock();
    private final StoredRow layout;
    /** Bytes of one row's weights in a chunk. */
    private final long weightStride;
    /** Bytes of one row's record in a chunk. */
    private final long recordStride;
    /** Bytes of one row in a chunk, weights and record. */
    private final long rowBytes;
    /** Cache lines {@link #preloadLines} reads of a row's weights and of its record: one per 64 bytes. */
    private final int weightLines;
    private final int recordLines;
    /** Offsets of the id, step count and stamp in a record. */
    private final long idAt;
    private final long stepsAt;
    private final long stampAt;
    /** Rows of chunk 0: {@code 1 << baseShift}. */
    private final int baseShift;
    /** Chunks that double; later ones have {@code 1 << (baseShift + growth)} rows. */
    private final int growth;
    /** Rows in the doubling chunks. */
    private final int firstFixedRow;
    private final Arena rowArena = Arena.ofShared();
    private MemorySegment[] chunks = new MemorySegment[4];
    private int chunkCount;
    private int rows;
    /** Free slots, a stack. Guarded by {@link #lock}. */
    private int[] free = new int[16];
    private int freeCount;
    /** The id index; its generations are freed by {@link #close}. */
    private final ShardIndex index;
    private boolean closed;
    /** Odd while a writer changes a row or the index; accessed through {@link #VERSION}. */
    @SuppressWarnings("unused")
    private long version;

    /** A shard of rows of {@code dimension} weights and {@code stateSlots} runs of optimizer state. */
    Shard(int dimension, int stateSlots) {
        this.layout = new StoredRow(dimension, stateSlots);
        this.weightStride = layout.weightStride;
        this.recordStride = layout.recordStride;
        this.rowBytes = layout.stride();
        this.index = new ShardIndex(rowBytes);
        this.weightLines = (int) ((weightStride + TOUCH_STEP - 1) / TOUCH_STEP);
        this.recordLines = (int) ((recordStride + TOUCH_STEP - 1) / TOUCH_STEP);
        this.idAt = layout.id;
        this.stepsAt = layout.steps;
        this.stampAt = layout.stamp;
        this.baseShift = 63 - Long.numberOfLeadingZeros(Math.max(1, CHUNK_TARGET_BYTES / rowBytes));
        int top = baseShift;
        while ((rowBytes << top) < RowMemory.HUGE_PAGE && top < 30) {
            top++;
        }
        this.growth = top - baseShift;
        this.firstFixedRow = ((1 << growth) - 1) << baseShift;
    }

    /**
     * The row of {@code id}, or -1; also without the lock, between {@link #readVersion} and
     * {@link #validate} ({@link ShardIndex#find}).
     */
    int find(long id, long hash) {
        return index.find(id, hash);
    }

    /**
     * Prefetches ({@link LinePrefetch}) the home index entry of each position of a batch grouped
     * by shard ({@code order}, with {@code start[s]} where shard {@code s}'s positions start and
     * {@code hash} by position), into {@code spans} (two longs per position). Without the locks:
     * an index freed meanwhile is only a prefetch of lines the processor ignores.
     */
    static void prefetchHomes(Shard[] shards, int[] start, int[] order, long[] hash, LineSpans spans) {
        int n = 0;
        for (int s = 0; s < shards.length; s++) {
            if (start[s] < start[s + 1]) {
                n = shards[s].index.homeLines(order, start[s], start[s + 1], hash, spans.pairs, n);
            }
        }
        LinePrefetch.spans(spans, n >> 1);
    }

    /**
     * The home index entries of ids (with the lock, or without it between {@link #readVersion}
     * and {@link #validate}): {@link ShardIndex#readHomes}.
     */
    void readHomes(int[] order, int from, int to, long[] hash, long[] entryId, long[] entryRef) {
        index.readHomes(order, from, to, hash, entryId, entryRef);
    }

    /**
     * The chunk that holds {@code row} (null if it is not, or no longer, there) and the offset of
     * its weights ({@link #weightsAt}) into entry {@code at} of {@code chunkOf} and
     * {@code weightsAt}, with one chunk number and without a branch on the row
     * ({@link #chunkIndex} and {@link #firstRow} branch on whether the row is in a doubling chunk,
     * which the hot rows of a skewed gather, the first ones created, often are and often not).
     * Without the lock, for optimistic readers (validate after reading from the chunk).
     */
    void weightsQuietly(int row, int at, MemorySegment[] chunkOf, long[] weightsAt) {
        // A doubling chunk c starts at row (2^c - 1) << baseShift; the fixed ones follow.
        int fixedShift = baseShift + growth;
        int early = Math.min(31 - Integer.numberOfLeadingZeros((row >>> baseShift) + 1), growth);
        int late = Math.max((row - firstFixedRow) >> fixedShift, 0);
        int c = early + late;
        MemorySegment[] all = chunks;
        chunkOf[at] = c < all.length ? all[c] : null;
        weightsAt[at] = (long) (row - (((1 << early) - 1) << baseShift) - (late << fixedShift)) * weightStride;
    }

    /** A version to validate an optimistic read with; odd while a write is under way. */
    long readVersion() {
        return (long) VERSION.getAcquire(this);
    }

    /** Whether no write began or was under way since {@code observed} was read: the reads between are whole. */
    boolean validate(long observed) {
        VarHandle.acquireFence();
        return (observed & 1) == 0 && (long) VERSION.getOpaque(this) == observed;
    }

    /** Before a writer (holding the lock) changes a row or the index. */
    void beginWrite() {
        assert lock.isHeldByCurrentThread();
        VERSION.setOpaque(this, (long) VERSION.getOpaque(this) + 1);
        VarHandle.releaseFence();
    }

    /** After the change. */
    void endWrite() {
        VERSION.setRelease(this, (long) VERSION.getOpaque(this) + 1);
    }

    /**
     * Copies the weights of {@code row} ({@code bytes}: all of them) without the lock; false if
     * the row's chunk is not (or no longer) there. Validate after.
     */
    boolean copyQuietly(int row, MemorySegment out, long at, long bytes) {
        MemorySegment[] all = chunks;
        int c = chunkIndex(row);
        MemorySegment chunk = c < all.length ? all[c] : null;
        if (chunk == null) {
            return false;
        }
        try {
            MemorySegment.copy(chunk, (long) (row - firstRow(c)) * weightStride, out, at, bytes);
            return true;
        } catch (IllegalStateException closedMeanwhile) {
            return false;
        }
    }

    /** Cache lines of a row's weights, as {@link #preloadLines} reads them. */
    int weightLines() {
        return weightLines;
    }

    /** Cache lines of a row's record, as {@link #preloadLines} reads them. */
    int recordLines() {
        return recordLines;
    }

    /**
     * One long of each of the {@code lines} cache lines from {@code from}, summed (the value means
     * nothing; without the lock it may read a row being written). A gather touches its rows'
     * weights this way, and a push its rows' weights and records (through a segment of all memory,
     * {@code PushSteps.preload}), in a loop of their own before using them, so that many rows'
     * cache misses are under way at once. Up to eight loads at constant offsets (a switch that
     * falls through, always the same case for a shard), the lines past the eighth by a call (no
     * loop, whose profiled predicates the JIT's warm-up may trip). Measured: a loop of one load
     * per line, or loads clamped to the end, cost a third to a half more per row.
     */
    @SuppressWarnings("fallthrough")
    static long preloadLines(MemorySegment chunk, long from, int lines) {
        long folded = 0;
        switch (Math.min(lines, 8)) {
            case 8: folded += chunk.get(RowLayout.LONG, from + 7 * TOUCH_STEP);
            case 7: folded += chunk.get(RowLayout.LONG, from + 6 * TOUCH_STEP);
            case 6: folded += chunk.get(RowLayout.LONG, from + 5 * TOUCH_STEP);
            case 5: folded += chunk.get(RowLayout.LONG, from + 4 * TOUCH_STEP);
            case 4: folded += chunk.get(RowLayout.LONG, from + 3 * TOUCH_STEP);
            case 3: folded += chunk.get(RowLayout.LONG, from + 2 * TOUCH_STEP);
            case 2: folded += chunk.get(RowLayout.LONG, from + TOUCH_STEP);
            default: folded += chunk.get(RowLayout.LONG, from);
        }
        return lines > 8 ? folded + preloadLines(chunk, from + 8 * TOUCH_STEP, lines - 8) : folded;
    }

    /** A cache line: {@link #preloadLines} reads one long per line (strides and chunk starts are multiples of 8). */
    private static final long TOUCH_STEP = 64;

    /**
     * Adds a zeroed row for {@code id}, which must be absent, and returns its number (inside a
     * write): a free slot if there is one, else a new one. Its record holds the id.
     */
    int append(long id, long hash) {
        assert lock.isHeldByCurrentThread();
        if (freeCount > 0) {
            int row = free[--freeCount];
            MemorySegment chunk = chunk(row);
            chunk.asSlice(weightsAt(row), weightStride).fill((byte) 0);
            chunk.asSlice(recordAt(row), recordStride).fill((byte) 0);
            chunk.set(RowLayout.LONG, recordAt(row) + idAt, id);
            index.insert(id, hash, row);
            return row;
        }
        index.growFor(rows + 1L, this);
        int row = rows;
        int chunk = chunkIndex(row);
        if (chunk == chunkCount) {
            if (chunkCount == chunks.length) {
                chunks = Arrays.copyOf(chunks, chunkCount * 2);
            }
            chunks[chunkCount] = RowMemory.allocate(rowArena, chunkRows(chunkCount) * rowBytes);
            chunkCount++;
        }
        rows++;
        chunk(row).set(RowLayout.LONG, recordAt(row) + idAt, id);
        index.insert(id, hash, row);
        return row;
    }

    /**
     * Deletes row {@code row}, which must be live (inside a write): its index entry goes by
     * backward-shift deletion, its slot is marked free ({@link #FREE_STEPS}) and kept for reuse.
     */
    void remove(int row) {
        assert lock.isHeldByCurrentThread();
        assert live(row) : "row " + row + " is free";
        MemorySegment chunk = chunk(row);
        long at = recordAt(row);
        long id = chunk.get(RowLayout.LONG, at + idAt);
        index.remove(id, row);
        chunk.set(RowLayout.LONG, at + idAt, 0L);
        chunk.set(RowLayout.LONG, at + stepsAt, FREE_STEPS);
        if (freeCount == free.length) {
            free = Arrays.copyOf(free, free.length * 2);
        }
        free[freeCount++] = row;
    }

    /** Whether slot {@code row} (below {@link #rows()}) holds a row, not a free slot. */
    boolean live(int row) {
        return steps(row) != FREE_STEPS;
    }

    /** The id of row {@code row} (0 for a free slot). */
    long id(int row) {
        return chunk(row).get(RowLayout.LONG, recordAt(row) + idAt);
    }

    /** The optimizer steps applied to row {@code row} ({@link #FREE_STEPS} for a free slot). */
    long steps(int row) {
        return chunk(row).get(RowLayout.LONG, recordAt(row) + stepsAt);
    }

    /**
     * Whether the slot whose record is at {@code r} of {@code chunk} holds the live row of
     * {@code id} (not freed, nor reused for another id).
     */
    boolean holdsAt(MemorySegment chunk, long r, long id) {
        assert lock.isHeldByCurrentThread();
        return chunk.get(RowLayout.LONG, r + stepsAt) != FREE_STEPS && chunk.get(RowLayout.LONG, r + idAt) == id;
    }

    /**
     * Checks that every live row is found by its id at its slot and the index holds no other
     * entry; for tests (under the lock). Returns the live rows.
     */
    int checkIndex() {
        assert lock.isHeldByCurrentThread();
        return index.checkIndex(this);
    }

    /** The time of the last update of {@code row}. */
    long stamp(int row) {
        assert lock.isHeldByCurrentThread();
        return chunk(row).get(RowLayout.LONG, recordAt(row) + stampAt);
    }

    /** Records an update of {@code row} at {@code now}. */
    void touch(int row, long now) {
        assert lock.isHeldByCurrentThread();
        chunk(row).set(RowLayout.LONG, recordAt(row) + stampAt, now);
    }

    /** Rows stored: slots minus free ones. */
    int liveRows() {
        return rows - freeCount;
    }

    /** The chunk that holds {@code row}. */
    MemorySegment chunk(int row) {
        return chunks[chunkIndex(row)];
    }

    /**
     * {@link #chunk}, {@link #weightsAt} and {@link #recordAt} of {@code row}, with one chunk
     * lookup, into entry {@code at} of the three arrays.
     */
    void locate(int row, int at, MemorySegment[] chunkOf, long[] weightsAt, long[] recordAt) {
        int c = chunkIndex(row);
        chunkOf[at] = chunks[c];
        weightsAt[at] = (long) (row - firstRow(c)) * weightStride;
        recordAt[at] = recordAt(row, c);
    }

    /** The offset of {@code row}'s weights in its chunk. */
    long weightsAt(int row) {
        return (long) (row - firstRow(chunkIndex(row))) * weightStride;
    }

    /** The offset of {@code row}'s record (id, steps, stamp, state; {@link StoredRow}) in its chunk. */
    long recordAt(int row) {
        int c = chunkIndex(row);
        return recordAt(row, c);
    }

    private long recordAt(int row, int c) {
        return chunkRows(c) * weightStride + (long) (row - firstRow(c)) * recordStride;
    }

    /**
     * One optimizer step on the row whose weights are at {@code w} and record at {@code r} of
     * {@code chunk} ({@link #chunk}, {@link #weightsAt} and {@link #recordAt} of a row found under
     * this lock: rows never move) with the gradient row at {@code g} of {@code grads}, and its
     * stamp set to {@code now} (inside a write).
     */
    void stepAt(MemorySegment chunk, long w, long r, OptimizerKernel kernel, int dimension, MemorySegment grads,
            long g, long now) {
        assert lock.isHeldByCurrentThread();
        kernel.step(chunk, w, r + stepsAt, r + StoredRow.STATE, dimension, grads, g);
        chunk.set(RowLayout.LONG, r + stampAt, now);
    }

    /** Writes row {@code row} in the {@link RowLayout} form (header, weights, state) to {@code out[at]}. */
    void readRow(int row, MemorySegment out, long at) {
        layout.toRow(chunk(row), weightsAt(row), recordAt(row), out, at);
    }

    /** Overwrites row {@code row} with the {@link RowLayout} row at {@code in[at]} (inside a write); its stamp is left. */
    void writeRow(int row, MemorySegment in, long at) {
        assert lock.isHeldByCurrentThread();
        layout.fromRow(in, at, chunk(row), weightsAt(row), recordAt(row));
    }

    /** The layout of the rows. */
    StoredRow layout() {
        return layout;
    }

    private int chunkIndex(int row) {
        if (row < firstFixedRow) {
            return 31 - Integer.numberOfLeadingZeros((row >>> baseShift) + 1);
        }
        return growth + ((row - firstFixedRow) >>> (baseShift + growth));
    }

    private long chunkRows(int chunk) {
        return 1L << (baseShift + Math.min(chunk, growth));
    }

    private int firstRow(int chunk) {
        if (chunk < growth) {
            return ((1 << chunk) - 1) << baseShift;
        }
        return firstFixedRow + ((chunk - growth) << (baseShift + growth));
    }

    /** Slots in use or free: the row numbers are {@code [0, rows())}. */
    int rows() {
        return rows;
    }

    /** Entries of the id index, used or empty; for tests. */
    long indexEntries() {
        return index.entries();
    }

    long reservedBytes() {
        long bytes = index.byteSize();
        for (int c = 0; c < chunkCount; c++) {
            bytes += chunkRows(c) * rowBytes;
        }
        return closed ? 0 : bytes;
    }

    /** A copy of all live rows in the {@link RowLayout} form, in row order (free slots left out), allocated from {@code arena}. */
    MemorySegment snapshot(Arena arena) {
        long out = layout.rowBytes;
        long bytes = (long) liveRows() * out;
        MemorySegment copy = arena.allocate(Math.max(1, bytes), Long.BYTES).asSlice(0, bytes);
        long to = 0;
        for (int row = 0; row < rows; row++) {
            if (live(row)) {
                readRow(row, copy, to);
                to += out;
            }
        }
        return copy;
    }

    boolean closed() {
        return closed;
    }

    void close() {
        if (!closed) {
            closed = true;
            chunks = new MemorySegment[0];
            rowArena.close();
            index.close();
        }
    }
}
