package dev.ferry.ps;

import static dev.ferry.ps.RowLayout.FLOAT;

import java.lang.foreign.MemorySegment;

/**
 * The row kernels one element at a time, in f32. {@link VectorKernels} does the same IEEE
 * operations in the same order lane by lane (no fused multiply-add), so the two give the same
 * bits; this one serves when the Vector API is absent, for heap segments, and for the elements
 * past the last whole vector of a row.
 *
 * <p>Offsets are in bytes; {@code n} counts floats. Arguments are checked by the callers.
 */
final class ScalarKernels {

    private ScalarKernels() {
    }

    /** {@code w -= lr * g}. */
    static void sgd(MemorySegment s, long w, MemorySegment g, long go, int n, float lr) {
        for (int j = 0; j < n; j++) {
            long o = 4L * j;
            s.set(FLOAT, w + o, s.get(FLOAT, w + o) - lr * g.get(FLOAT, go + o));
        }
    }

    /** {@code a += g*g; w -= lr * g / (sqrt(a) + eps)}. */
    static void adagrad(MemorySegment s, long w, long a, MemorySegment g, long go, int n, float lr, float eps) {
        for (int j = 0; j < n; j++) {
            long o = 4L * j;
            float grad = g.get(FLOAT, go + o);
            float acc = s.get(FLOAT, a + o) + grad * grad;
            s.set(FLOAT, a + o, acc);
            s.set(FLOAT, w + o, s.get(FLOAT, w + o) - lr * grad / ((float) Math.sqrt(acc) + eps));
        }
    }

    /** {@code m = b1 m + (1-b1) g; v = b2 v + (1-b2) g*g; w -= scale * m / (sqrt(v) + epsHat)}. */
    static void adam(MemorySegment s, long w, long mAt, long vAt, MemorySegment g, long go, int n, float b1,
            float oneMinusB1, float b2, float oneMinusB2, float scale, float epsHat) {
        for (int j = 0; j < n; j++) {
            long o = 4L * j;
            float grad = g.get(FLOAT, go + o);
            float m = s.get(FLOAT, mAt + o) * b1 + grad * oneMinusB1;
            float v = s.get(FLOAT, vAt + o) * b2 + grad * grad * oneMinusB2;
            s.set(FLOAT, mAt + o, m);
            s.set(FLOAT, vAt + o, v);
            s.set(FLOAT, w + o, s.get(FLOAT, w + o) - scale * m / ((float) Math.sqrt(v) + epsHat));
        }
    }

    /**
     * FTRL-Proximal: {@code sigma = (sqrt(n + g*g) - sqrt(n)) / alpha}, computed as
     * {@code g*g / (sqrt(n + g*g) + sqrt(n)) / alpha}, which does not cancel in f32;
     * {@code z += g - sigma w; n += g*g; w = |z| <= l1 ? 0 : -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2)}.
     */
    static void ftrl(MemorySegment s, long w, long zAt, long nAt, MemorySegment g, long go, int n, float invAlpha,
            float beta, float l1, float l2) {
        for (int j = 0; j < n; j++) {
            long o = 4L * j;
            float grad = g.get(FLOAT, go + o);
            float squared = grad * grad;
            float before = s.get(FLOAT, nAt + o);
            float after = before + squared;
            float rootAfter = (float) Math.sqrt(after);
            float sigma = squared / Math.max((float) Math.sqrt(before) + rootAfter, Float.MIN_NORMAL) * invAlpha;
            float z = s.get(FLOAT, zAt + o) + (grad - sigma * s.get(FLOAT, w + o));
            s.set(FLOAT, zAt + o, z);
            s.set(FLOAT, nAt + o, after);
            float magnitude = Math.abs(z);
            float shrunk = (magnitude - l1) / ((beta + rootAfter) * invAlpha + l2);
            s.set(FLOAT, w + o, magnitude <= l1 ? 0f : z < 0 ? shrunk : -shrunk);
        }
    }

    /** {@link #add} per listed row: see {@link Kernels#addRows}. */
    static void addRows(MemorySegment out, int[] outRow, MemorySegment in, int[] inRow, int from, int to, int n) {
        long rowBytes = 4L * n;
        for (int k = from; k < to; k++) {
            add(out, outRow[k] * rowBytes, in, inRow[k] * rowBytes, n);
        }
    }

    /** {@code out[to + j] += in[from + j]}. */
    static void add(MemorySegment out, long to, MemorySegment in, long from, int n) {
        for (int j = 0; j < n; j++) {
            long o = 4L * j;
            out.set(FLOAT, to + o, out.get(FLOAT, to + o) + in.get(FLOAT, from + o));
        }
    }

    /** The index of the first float of {@code in[0, bytes)} that is NaN or infinite, or -1. */
    static long firstNonFinite(MemorySegment in, long from, long bytes) {
        for (long at = 0; at < bytes; at += Float.BYTES) {
            if (!Float.isFinite(in.get(FLOAT, from + at))) {
                return at / Float.BYTES;
            }
        }
        return -1;
    }
}
