package dev.ferry.ps;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The layout of one row: the form of a sparse table's rows in checkpoints, slot moves,
 * replication and row copies, and a whole dense tensor in memory (one row whose dimension is
 * the tensor's length). A sparse table's shard stores its rows otherwise, weights apart from
 * the optimizer state ({@link StoredRow}), and converts to and from this form.
 *
 * <pre>
 *  0              8              16               16 + 4d              16 + 4d(1 + k)
 *  +--------------+--------------+----------------+--------------------+---------+
 *  | id   (int64) | steps (int64)| weights f32[d] | state f32[k][d]    | pad to 8|
 *  +--------------+--------------+----------------+--------------------+---------+
 * </pre>
 * {@code d} is the dimension and {@code k} the optimizer's state slots
 * ({@link Optimizer#stateSlots()}: SGD 0, Adagrad 1 (accumulator), Adam 2 (m, v), FTRL 2 (z, n)).
 * {@code steps} counts the optimizer steps applied to the row (Adam's bias correction uses it).
 * Everything is little-endian: rows are written to checkpoints byte for byte, and the weights
 * are copied byte for byte into response buffers, so the wire format is little-endian f32.
 */
final class RowLayout {

    /** Little-endian f32 at any byte offset (request and response buffers need not be aligned). */
    static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** Little-endian i64 at any byte offset. */
    static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    static final int ID_OFFSET = 0;
    static final int STEPS_OFFSET = 8;
    static final int WEIGHTS_OFFSET = 16;

    private RowLayout() {
    }

    /** Bytes of one row, header and padding included. */
    static long rowBytes(long dimension, int stateSlots) {
        long bytes = WEIGHTS_OFFSET + Float.BYTES * dimension * (1 + stateSlots);
        return (bytes + 7) & ~7L;
    }

    /** Offset of weight {@code j} in a row. */
    static long weight(long j) {
        return WEIGHTS_OFFSET + (long) Float.BYTES * j;
    }

    /** Offset of element {@code j} of state slot {@code slot} in a row of dimension {@code dimension}. */
    static long state(long dimension, int slot, long j) {
        return WEIGHTS_OFFSET + Float.BYTES * (dimension * (1 + slot) + j);
    }
}
