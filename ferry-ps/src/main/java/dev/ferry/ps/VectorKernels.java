package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The row kernels with the Vector API ({@code jdk.incubator.vector}), the machine's widest
 * float vectors (16 lanes with AVX-512). Lane for lane the operations of {@link ScalarKernels},
 * which also does the elements past the last whole vector, so results are the same bits either
 * way. Loaded only through {@link Kernels} when the module is present. Native segments only.
 */
final class VectorKernels {

    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final int LANES = F.length();
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private VectorKernels() {
    }

    static void sgd(MemorySegment s, long w, MemorySegment g, long go, int n, float lr) {
        int j = 0;
        for (; j <= n - LANES; j += LANES) {
            long o = 4L * j;
            FloatVector grad = FloatVector.fromMemorySegment(F, g, go + o, LE);
            FloatVector weight = FloatVector.fromMemorySegment(F, s, w + o, LE);
            weight.sub(grad.mul(lr)).intoMemorySegment(s, w + o, LE);
        }
        if (j < n) {
            long o = 4L * j;
            ScalarKernels.sgd(s, w + o, g, go + o, n - j, lr);
        }
    }

    static void adagrad(MemorySegment s, long w, long a, MemorySegment g, long go, int n, float lr, float eps) {
        if (n == 64 && LANES >= 8) {
            adagrad64(s, w, a, g, go, lr, eps);
            return;
        }
        int j = 0;
        for (; j <= n - LANES; j += LANES) {
            long o = 4L * j;
            adagrad(s, w + o, a + o, g, go + o, lr, eps);
        }
        if (j < n) {
            long o = 4L * j;
            ScalarKernels.adagrad(s, w + o, a + o, g, go + o, n - j, lr, eps);
        }
    }

    /**
     * {@link #adagrad} at dimension 64 with 16- or 8-lane vectors, a row's vectors written out with
     * no loop (as {@link #addRows64}): the loop of four trips per row cost its pre- and post-loop
     * and range checks on every row.
     */
    private static void adagrad64(MemorySegment s, long w, long a, MemorySegment g, long go, float lr, float eps) {
        if (LANES == 16) {
            adagrad(s, w, a, g, go, lr, eps);
            adagrad(s, w + 64, a + 64, g, go + 64, lr, eps);
            adagrad(s, w + 128, a + 128, g, go + 128, lr, eps);
            adagrad(s, w + 192, a + 192, g, go + 192, lr, eps);
        } else { // 8 lanes
            adagrad(s, w, a, g, go, lr, eps);
            adagrad(s, w + 32, a + 32, g, go + 32, lr, eps);
            adagrad(s, w + 64, a + 64, g, go + 64, lr, eps);
            adagrad(s, w + 96, a + 96, g, go + 96, lr, eps);
            adagrad(s, w + 128, a + 128, g, go + 128, lr, eps);
            adagrad(s, w + 160, a + 160, g, go + 160, lr, eps);
            adagrad(s, w + 192, a + 192, g, go + 192, lr, eps);
            adagrad(s, w + 224, a + 224, g, go + 224, lr, eps);
        }
    }

    /** One vector of an Adagrad step (byte offsets). */
    private static void adagrad(MemorySegment s, long w, long a, MemorySegment g, long go, float lr, float eps) {
        FloatVector grad = FloatVector.fromMemorySegment(F, g, go, LE);
        FloatVector acc = FloatVector.fromMemorySegment(F, s, a, LE).add(grad.mul(grad));
        acc.intoMemorySegment(s, a, LE);
        FloatVector weight = FloatVector.fromMemorySegment(F, s, w, LE);
        weight.sub(grad.mul(lr).div(acc.sqrt().add(eps))).intoMemorySegment(s, w, LE);
    }

    static void adam(MemorySegment s, long w, long mAt, long vAt, MemorySegment g, long go, int n, float b1,
            float oneMinusB1, float b2, float oneMinusB2, float scale, float epsHat) {
        int j = 0;
        for (; j <= n - LANES; j += LANES) {
            long o = 4L * j;
            FloatVector grad = FloatVector.fromMemorySegment(F, g, go + o, LE);
            FloatVector m = FloatVector.fromMemorySegment(F, s, mAt + o, LE).mul(b1).add(grad.mul(oneMinusB1));
            FloatVector v = FloatVector.fromMemorySegment(F, s, vAt + o, LE).mul(b2)
                    .add(grad.mul(grad).mul(oneMinusB2));
            m.intoMemorySegment(s, mAt + o, LE);
            v.intoMemorySegment(s, vAt + o, LE);
            FloatVector weight = FloatVector.fromMemorySegment(F, s, w + o, LE);
            weight.sub(m.mul(scale).div(v.sqrt().add(epsHat))).intoMemorySegment(s, w + o, LE);
        }
        if (j < n) {
            long o = 4L * j;
            ScalarKernels.adam(s, w + o, mAt + o, vAt + o, g, go + o, n - j, b1, oneMinusB1, b2, oneMinusB2, scale,
                    epsHat);
        }
    }

    static void ftrl(MemorySegment s, long w, long zAt, long nAt, MemorySegment g, long go, int n, float invAlpha,
            float beta, float l1, float l2) {
        int j = 0;
        for (; j <= n - LANES; j += LANES) {
            long o = 4L * j;
            FloatVector grad = FloatVector.fromMemorySegment(F, g, go + o, LE);
            FloatVector squared = grad.mul(grad);
            FloatVector before = FloatVector.fromMemorySegment(F, s, nAt + o, LE);
            FloatVector after = before.add(squared);
            FloatVector rootAfter = after.sqrt();
            FloatVector sigma = squared.div(before.sqrt().add(rootAfter).max(Float.MIN_NORMAL)).mul(invAlpha);
            FloatVector weight = FloatVector.fromMemorySegment(F, s, w + o, LE);
            FloatVector z = FloatVector.fromMemorySegment(F, s, zAt + o, LE).add(grad.sub(sigma.mul(weight)));
            z.intoMemorySegment(s, zAt + o, LE);
            after.intoMemorySegment(s, nAt + o, LE);
            FloatVector magnitude = z.abs();
            FloatVector shrunk = magnitude.sub(l1).div(rootAfter.add(beta).mul(invAlpha).add(l2));
            VectorMask<Float> negative = z.compare(VectorOperators.LT, 0f);
            VectorMask<Float> zero = magnitude.compare(VectorOperators.LE, l1);
            shrunk.neg().blend(shrunk, negative).blend(0f, zero).intoMemorySegment(s, w + o, LE);
        }
        if (j < n) {
            long o = 4L * j;
            ScalarKernels.ftrl(s, w + o, zAt + o, nAt + o, g, go + o, n - j, invAlpha, beta, l1, l2);
        }
    }

    /**
     * The rows' loop and the vectors' in one method (no call per row: see {@link Kernels#addRows});
     * at dimension 64 with a constant trip count, which the compiler unrolls whole.
     */
    static void addRows(MemorySegment out, int[] outRow, MemorySegment in, int[] inRow, int from, int to, int n) {
        if (n == 64 && LANES >= 8) {
            addRows64(out, outRow, in, inRow, from, to);
            return;
        }
        long rowBytes = 4L * n;
        for (int k = from; k < to; k++) {
            long o = outRow[k] * rowBytes;
            long i = inRow[k] * rowBytes;
            int j = 0;
            for (; j <= n - LANES; j += LANES) {
                FloatVector.fromMemorySegment(F, out, o + 4L * j, LE)
                        .add(FloatVector.fromMemorySegment(F, in, i + 4L * j, LE)).intoMemorySegment(out, o + 4L * j, LE);
            }
            if (j < n) {
                ScalarKernels.add(out, o + 4L * j, in, i + 4L * j, n - j);
            }
        }
    }

    /**
     * {@link #addRows} from rows of a {@code float[]} ({@code in[inBase + inRow[k] * n ..]}); the
     * tail past the last whole vector lane for lane as {@link ScalarKernels#add}.
     */
    static void addRowsFromArray(MemorySegment out, int[] outRow, float[] in, int inBase, int[] inRow, int from,
            int to, int n) {
        if (n == 64 && LANES >= 8) {
            addRowsFromArray64(out, outRow, in, inBase, inRow, from, to);
            return;
        }
        long rowBytes = 4L * n;
        for (int k = from; k < to; k++) {
            long o = outRow[k] * rowBytes;
            int i = inBase + inRow[k] * n;
            int j = 0;
            for (; j <= n - LANES; j += LANES) {
                FloatVector.fromMemorySegment(F, out, o + 4L * j, LE).add(FloatVector.fromArray(F, in, i + j))
                        .intoMemorySegment(out, o + 4L * j, LE);
            }
            for (; j < n; j++) {
                long at = o + 4L * j;
                out.set(RowLayout.FLOAT, at, out.get(RowLayout.FLOAT, at) + in[i + j]);
            }
        }
    }

    /**
     * {@link #addRows} at dimension 64 with 16- or 8-lane vectors: a row is written out as its
     * four or eight vectors, with no loop inside the row. With the inner loop C2's first compiles
     * hoisted the segments' class and liveness checks out of the rows' loop on the strength of the
     * profile (profiled loop predication); the warm-up's on-stack replacement then tripped those
     * predicates, and the recompiled loop checked both segments on every row: the sums of a
     * 4,096-id push took 58 us instead of 27, depending on what else the JVM had compiled first.
     */
    private static void addRows64(MemorySegment out, int[] outRow, MemorySegment in, int[] inRow, int from, int to) {
        if (LANES == 16) {
            for (int k = from; k < to; k++) {
                long o = outRow[k] * 256L;
                long i = inRow[k] * 256L;
                add(out, o, in, i);
                add(out, o + 64, in, i + 64);
                add(out, o + 128, in, i + 128);
                add(out, o + 192, in, i + 192);
            }
        } else { // 8 lanes (4-lane vectors take the general loop)
            for (int k = from; k < to; k++) {
                long o = outRow[k] * 256L;
                long i = inRow[k] * 256L;
                add(out, o, in, i);
                add(out, o + 32, in, i + 32);
                add(out, o + 64, in, i + 64);
                add(out, o + 96, in, i + 96);
                add(out, o + 128, in, i + 128);
                add(out, o + 160, in, i + 160);
                add(out, o + 192, in, i + 192);
                add(out, o + 224, in, i + 224);
            }
        }
    }

    /** {@link #addRowsFromArray} at dimension 64, a row's vectors written out as {@link #addRows64} says why. */
    private static void addRowsFromArray64(MemorySegment out, int[] outRow, float[] in, int inBase, int[] inRow,
            int from, int to) {
        if (LANES == 16) {
            for (int k = from; k < to; k++) {
                long o = outRow[k] * 256L;
                int i = inBase + inRow[k] * 64;
                add(out, o, in, i);
                add(out, o + 64, in, i + 16);
                add(out, o + 128, in, i + 32);
                add(out, o + 192, in, i + 48);
            }
        } else { // 8 lanes
            for (int k = from; k < to; k++) {
                long o = outRow[k] * 256L;
                int i = inBase + inRow[k] * 64;
                add(out, o, in, i);
                add(out, o + 32, in, i + 8);
                add(out, o + 64, in, i + 16);
                add(out, o + 96, in, i + 24);
                add(out, o + 128, in, i + 32);
                add(out, o + 160, in, i + 40);
                add(out, o + 192, in, i + 48);
                add(out, o + 224, in, i + 56);
            }
        }
    }

    /** One vector: {@code out[o..] += in[i..]} (byte offsets). */
    private static void add(MemorySegment out, long o, MemorySegment in, long i) {
        FloatVector.fromMemorySegment(F, out, o, LE).add(FloatVector.fromMemorySegment(F, in, i, LE))
                .intoMemorySegment(out, o, LE);
    }

    /** One vector: {@code out[o..] += in[i..]} (a byte offset, an array index). */
    private static void add(MemorySegment out, long o, float[] in, int i) {
        FloatVector.fromMemorySegment(F, out, o, LE).add(FloatVector.fromArray(F, in, i)).intoMemorySegment(out, o, LE);
    }

    static void add(MemorySegment out, long to, MemorySegment in, long from, int n) {
        int j = 0;
        for (; j <= n - LANES; j += LANES) {
            long o = 4L * j;
            FloatVector.fromMemorySegment(F, out, to + o, LE).add(FloatVector.fromMemorySegment(F, in, from + o, LE))
                    .intoMemorySegment(out, to + o, LE);
        }
        if (j < n) {
            long o = 4L * j;
            ScalarKernels.add(out, to + o, in, from + o, n - j);
        }
    }

    /** Whether every float of {@code in[from, from + bytes)} is finite: x * 0 is NaN exactly for NaN and infinities. */
    static boolean allFinite(MemorySegment in, long from, long bytes) {
        long n = bytes / Float.BYTES;
        FloatVector acc = FloatVector.zero(F);
        long j = 0;
        for (; j <= n - LANES; j += LANES) {
            acc = acc.add(FloatVector.fromMemorySegment(F, in, from + 4 * j, LE).mul(0f));
        }
        float rest = acc.reduceLanes(VectorOperators.ADD);
        return Float.isFinite(rest) && ScalarKernels.firstNonFinite(in, from + 4 * j, bytes - 4 * j) < 0;
    }
}
