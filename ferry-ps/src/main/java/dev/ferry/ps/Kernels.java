package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

/**
 * Chooses the row kernels: {@link VectorKernels} when the JVM was started with
 * {@code --add-modules jdk.incubator.vector}, compiles with C2, {@code -Dferry.ps.vector=false}
 * is not set and both segments are native, else {@link ScalarKernels}. Both compute the same bits; the vector
 * ones are about four times faster (docs/ps-kernels.md).
 */
final class Kernels {

    /** Whether the Vector API is used. */
    static final boolean VECTOR = vectorAvailable();
    /** The source of {@link #zero}: 16 KiB of zeros, small enough to stay in the first-level cache. */
    private static final MemorySegment ZEROS = java.lang.foreign.Arena.global().allocate(16 << 10, 64);

    private Kernels() {
    }

    private static boolean vectorAvailable() {
        return Boolean.parseBoolean(System.getProperty("ferry.ps.vector", "true"))
                && ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent() && optimizingJit();
    }

    /**
     * Whether C2 compiles: the Vector API is fast only once C2 turns it into vector instructions;
     * interpreted or compiled by C1 alone ({@code -Xint}, {@code -XX:TieredStopAtLevel=1}, as
     * short-lived benchmark children use) it is hundreds of times slower than scalar code.
     */
    private static boolean optimizingJit() {
        if (System.getProperty("java.vm.info", "").contains("interpreted")) {
            return false;
        }
        try {
            var vm = java.lang.management.ManagementFactory.getPlatformMXBean(
                    com.sun.management.HotSpotDiagnosticMXBean.class);
            return vm == null || !vm.getVMOption("TieredCompilation").getValue().equals("true")
                    || Integer.parseInt(vm.getVMOption("TieredStopAtLevel").getValue()) >= 4;
        } catch (RuntimeException | LinkageError notHotSpot) {
            return true;
        }
    }

    /** What computes the kernels, for logs and benchmark reports. */
    static String describe() {
        return VECTOR ? "Vector API"
                : "scalar (vectors need --add-modules jdk.incubator.vector and the C2 compiler)";
    }

    private static boolean vector(MemorySegment a, MemorySegment b) {
        return VECTOR && a.isNative() && b.isNative();
    }

    static void sgd(MemorySegment s, long w, MemorySegment g, long go, int n, float lr) {
        if (vector(s, g)) {
            VectorKernels.sgd(s, w, g, go, n, lr);
        } else {
            ScalarKernels.sgd(s, w, g, go, n, lr);
        }
    }

    static void adagrad(MemorySegment s, long w, long a, MemorySegment g, long go, int n, float lr, float eps) {
        if (vector(s, g)) {
            VectorKernels.adagrad(s, w, a, g, go, n, lr, eps);
        } else {
            ScalarKernels.adagrad(s, w, a, g, go, n, lr, eps);
        }
    }

    static void adam(MemorySegment s, long w, long m, long v, MemorySegment g, long go, int n, float b1,
            float oneMinusB1, float b2, float oneMinusB2, float scale, float epsHat) {
        if (vector(s, g)) {
            VectorKernels.adam(s, w, m, v, g, go, n, b1, oneMinusB1, b2, oneMinusB2, scale, epsHat);
        } else {
            ScalarKernels.adam(s, w, m, v, g, go, n, b1, oneMinusB1, b2, oneMinusB2, scale, epsHat);
        }
    }

    static void ftrl(MemorySegment s, long w, long z, long nAt, MemorySegment g, long go, int n, float invAlpha,
            float beta, float l1, float l2) {
        if (vector(s, g)) {
            VectorKernels.ftrl(s, w, z, nAt, g, go, n, invAlpha, beta, l1, l2);
        } else {
            ScalarKernels.ftrl(s, w, z, nAt, g, go, n, invAlpha, beta, l1, l2);
        }
    }

    /**
     * {@link #add} of rows {@code [from, to)} of a list: for each {@code k}, the {@code n} floats
     * of {@code in} at row {@code inRow[k]} added to those of {@code out} at row {@code outRow[k]}
     * (rows of {@code 4n} bytes), in list order. One call per list, so the loop over rows is
     * compiled with the row kernel whatever the compiler inlined elsewhere (a row kernel compiled
     * on its own first is too big to be inlined into its caller later: measured, 2x per row).
     */
    static void addRows(MemorySegment out, int[] outRow, MemorySegment in, int[] inRow, int from, int to, int n) {
        if (vector(out, in)) {
            VectorKernels.addRows(out, outRow, in, inRow, from, to, n);
        } else if (VECTOR && out.isNative() && in.heapBase().orElse(null) instanceof float[] array
                && (in.address() & 3) == 0 && ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN) {
            // A caller's float[] (the client's push(float[])): the Vector API reads no heap
            // segment but a byte[]'s, so the rows are read from the array itself, whose floats
            // are the segment's little-endian ones on a little-endian machine.
            VectorKernels.addRowsFromArray(out, outRow, array, (int) (in.address() >>> 2), inRow, from, to, n);
        } else {
            ScalarKernels.addRows(out, outRow, in, inRow, from, to, n);
        }
    }

    /**
     * {@code out[to..] += in[from..]}, {@code n} floats.
     *
     * <p>Called once per row, and a row is a few vectors (64 floats are 4 of 16 lanes). With a
     * trip count known only at run time C2 compiles the loop as pre, unrolled main and post loops
     * with their checks, and at 4 iterations the unrolled loop never runs. So the common row widths
     * call the vector kernel with a constant width, which C2 inlines at that call site and unrolls
     * whole: at dimension 64 the sum of duplicate gradients took 12.3 ns per row with a variable
     * width, 5.9 ns with a constant one (JMH, same run). The optimizer steps, which divide and take
     * square roots, gained nothing measurable from the same, so they keep the variable loop.
     */
    static void add(MemorySegment out, long to, MemorySegment in, long from, int n) {
        if (vector(out, in)) {
            switch (n) {
                case 32 -> VectorKernels.add(out, to, in, from, 32);
                case 64 -> VectorKernels.add(out, to, in, from, 64);
                case 128 -> VectorKernels.add(out, to, in, from, 128);
                default -> VectorKernels.add(out, to, in, from, n);
            }
        } else {
            ScalarKernels.add(out, to, in, from, n);
        }
    }

    /** Zeroes {@code out[at, at + bytes)} without allocating (a slice to fill would be an object per call). */
    static void zero(MemorySegment out, long at, long bytes) {
        long chunk = ZEROS.byteSize();
        for (long done = 0; done < bytes; done += chunk) {
            MemorySegment.copy(ZEROS, 0, out, at + done, Math.min(chunk, bytes - done));
        }
    }

    /** The index of the first NaN or infinite float of {@code in[from, from + bytes)}, or -1. */
    static long firstNonFinite(MemorySegment in, long from, long bytes) {
        if (VECTOR && in.isNative() && VectorKernels.allFinite(in, from, bytes)) {
            return -1;
        }
        return ScalarKernels.firstNonFinite(in, from, bytes);
    }
}
