package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PullFormat;

/**
 * A server's pull in a compressed {@link PullFormat}: rows are gathered in f32 into a per-thread
 * block of at most {@value #BLOCK_FLOATS} floats (it stays in L2), then encoded from there into
 * the registered reply buffer, block after block. An f32 pull gathers straight into the reply.
 * Allocates nothing in steady state (the block grows once to the widest row seen).
 */
final class PullEncoder {

    /** Floats of the per-thread f32 block (64 KiB). */
    static final int BLOCK_FLOATS = 1 << 14;

    private static final ThreadLocal<float[][]> BLOCK = ThreadLocal.withInitial(() -> new float[][] {new float[BLOCK_FLOATS]});

    private PullEncoder() {
    }

    /** Gathers {@code ids[0, count)} and writes them to {@code out} in {@code format}, row after row. */
    static void pull(ParameterServer ps, String table, int dimension, long[] ids, int count, PullFormat format,
            MemorySegment out) {
        if (format == PullFormat.F32 || count == 0) {
            ps.pull(table, dimension, ids, 0, count, out);
            return;
        }
        float[][] holder = BLOCK.get();
        if (holder[0].length < dimension) {
            holder[0] = new float[dimension];
        }
        float[] block = holder[0];
        MemorySegment blockSegment = MemorySegment.ofArray(block);
        int rowsPerBlock = Math.max(1, block.length / Math.max(dimension, 1));
        long encodedRow = format.rowBytes(dimension);
        for (int from = 0; from < count; from += rowsPerBlock) {
            int n = Math.min(rowsPerBlock, count - from);
            ps.pull(table, dimension, ids, from, n, blockSegment.asSlice(0, (long) n * dimension * Float.BYTES));
            format.encode(block, n, dimension, out, from * encodedRow);
        }
    }
}
