package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * How a {@link Shard} stores its rows in memory, which is not the row format of the wire,
 * checkpoints and moves ({@link RowLayout}): a chunk of {@code n} rows keeps the weights of
 * all its rows together, then their records (header and optimizer state), so that a pull reads
 * the weights' cache lines only (256 bytes, 4 lines at dimension 64, where a whole Adagrad row
 * is 528 bytes over 9), and the hot rows' weights take half the cache they took inline.
 *
 * <pre>
 *  chunk of n rows (row i is the chunk's i-th):
 *  0            ws           2 ws         n ws              n ws + rs
 *  +------------+------------+-- ... --+-----------------+-----------------+-- ... --+
 *  | weights 0  | weights 1  |          | record 0        | record 1        |          |
 *  +------------+------------+-- ... --+-----------------+-----------------+-- ... --+
 *
 *  weights: f32[d], little-endian                      stride ws = 4d rounded up to 8
 *  record:  0                   s = 4kd rounded to 8   s + 8         s + 16        s + 24
 *           +-------------------+----------------------+-------------+-------------+--------+
 *           | state f32[k][d]   | id int64             | steps int64 | stamp int64 | pad    |
 *           +-------------------+----------------------+-------------+-------------+--------+
 * </pre>
 * The record's stride is {@code s + 24} rounded up to 8, or to 64 when the state fills a cache
 * line or more: with 64-byte chunk starts and a weights stride that is a multiple of 64 (any
 * dimension that is a multiple of 16), every row's weights and state then start on a cache
 * line, so no vector load or store of a step straddles two.
 * {@code k} is the optimizer's state slots, {@code steps} as in {@link RowLayout} ({@link
 * Shard#FREE_STEPS} on a free slot), {@code stamp} the time of the row's last update, for
 * eviction. {@link #toRow} and {@link #fromRow} convert to and from the {@link RowLayout} form,
 * byte for byte (its padding is zero).
 */
final class StoredRow {

    /** Offsets in a record. */
    static final int STATE = 0;
    final long id;
    final long steps;
    final long stamp;

    final long dimension;
    final int stateSlots;
    /** Bytes of one row's weights in a chunk. */
    final long weightStride;
    /** Bytes of one row's record in a chunk. */
    final long recordStride;
    /** Bytes of one row in {@link RowLayout}. */
    final long rowBytes;
    private final long weightBytes;
    private final long stateBytes;

    StoredRow(long dimension, int stateSlots) {
        this.dimension = dimension;
        this.stateSlots = stateSlots;
        this.weightBytes = Float.BYTES * dimension;
        this.stateBytes = Float.BYTES * dimension * stateSlots;
        this.weightStride = (weightBytes + 7) & ~7L;
        this.id = (stateBytes + 7) & ~7L;
        this.steps = id + 8;
        this.stamp = id + 16;
        long record = id + 24;
        this.recordStride = stateBytes >= 64 ? (record + 63) & ~63L : record;
        this.rowBytes = RowLayout.rowBytes(dimension, stateSlots);
    }

    /** Bytes of one row in a chunk, weights and record. */
    long stride() {
        return weightStride + recordStride;
    }

    /** Writes the row whose weights are at {@code w} and record at {@code r} of {@code chunk} to {@code out[at]} in {@link RowLayout}. */
    void toRow(MemorySegment chunk, long w, long r, MemorySegment out, long at) {
        out.set(RowLayout.LONG, at + RowLayout.ID_OFFSET, chunk.get(RowLayout.LONG, r + id));
        out.set(RowLayout.LONG, at + RowLayout.STEPS_OFFSET, chunk.get(RowLayout.LONG, r + steps));
        MemorySegment.copy(chunk, w, out, at + RowLayout.WEIGHTS_OFFSET, weightBytes);
        long state = at + RowLayout.WEIGHTS_OFFSET + weightBytes;
        MemorySegment.copy(chunk, r + STATE, out, state, stateBytes);
        long end = at + rowBytes;
        for (long pad = state + stateBytes; pad < end; pad++) {
            out.set(java.lang.foreign.ValueLayout.JAVA_BYTE, pad, (byte) 0);
        }
    }

    /** Writes the {@link RowLayout} row at {@code in[at]} to the row at {@code w} and {@code r} of {@code chunk}; the stamp is left. */
    void fromRow(MemorySegment in, long at, MemorySegment chunk, long w, long r) {
        chunk.set(RowLayout.LONG, r + id, in.get(RowLayout.LONG, at + RowLayout.ID_OFFSET));
        chunk.set(RowLayout.LONG, r + steps, in.get(RowLayout.LONG, at + RowLayout.STEPS_OFFSET));
        MemorySegment.copy(in, at + RowLayout.WEIGHTS_OFFSET, chunk, w, weightBytes);
        MemorySegment.copy(in, at + RowLayout.WEIGHTS_OFFSET + weightBytes, chunk, r + STATE, stateBytes);
    }
}
