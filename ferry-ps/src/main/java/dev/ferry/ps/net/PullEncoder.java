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

    private static final ThreadLocal<MemorySegment[]> BLOCK = ThreadLocal.withInitial(
            () -> new MemorySegment[] {MemorySegment.ofArray(new float[BLOCK_FLOATS])});

    private PullEncoder() {
    }

    /** Gathers {@code ids[0, count)} and writes them to {@code out} in {@code format}, row after row. */
    static void pull(ParameterServer ps, String table, int dimension, long[] ids, int count, PullFormat format,
            MemorySegment out) {
        if (format == PullFormat.F32 || count == 0) {
            ps.pull(table, dimension, ids, 0, count, out);
            return;
        }
        MemorySegment[] holder = BLOCK.get();
        long rowF32 = (long) Math.max(dimension, 1) * Float.BYTES;
        if (holder[0].byteSize() < rowF32) {
            holder[0] = MemorySegment.ofArray(new float[Math.max(dimension, 1)]);
        }
        MemorySegment block = holder[0];
        int rowsPerBlock = (int) Math.max(1, block.byteSize() / rowF32);
        long encodedRow = format.rowBytes(dimension);
        for (int from = 0; from < count; from += rowsPerBlock) {
            int n = Math.min(rowsPerBlock, count - from);
            MemorySegment rows = block.asSlice(0, n * rowF32);
            ps.pull(table, dimension, ids, from, n, rows);
            format.encode(rows, 0, n, dimension, out, from * encodedRow);
        }
    }
}
