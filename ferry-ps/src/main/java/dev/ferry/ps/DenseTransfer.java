package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * The whole row of a dense tensor (weights, optimizer state and step count, {@link RowLayout})
 * for moving it between servers with its slot group, as {@link RowTransfer} does for sparse
 * rows: the step count is the row's version, and a merge keeps the copy with the most steps.
 */
public final class DenseTransfer {

    private DenseTransfer() {
    }

    /** Bytes of the whole row of {@code tensor}. */
    public static long rowBytes(DenseTensor tensor) {
        return tensor.config().bytes();
    }

    /** The step count (version) of a whole row. */
    public static long stepsOf(MemorySegment row) {
        return row.get(RowLayout.LONG, RowLayout.STEPS_OFFSET);
    }

    /** Copies the whole row of {@code tensor} to the start of {@code out} (one consistent cut). */
    public static void copy(DenseTensor tensor, MemorySegment out) {
        if (out.byteSize() < rowBytes(tensor)) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "the output holds " + out.byteSize()
                    + " bytes; the row of tensor '" + tensor.name() + "' takes " + rowBytes(tensor));
        }
        tensor.copyRow(out);
    }

    /**
     * Replaces the row of {@code tensor} with {@code row} if {@code always} or if {@code row} has
     * at least as many steps; returns whether it did.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if {@code row} is not one whole row of it
     */
    public static boolean merge(DenseTensor tensor, MemorySegment row, boolean always) {
        return tensor.mergeRow(row, always);
    }
}
