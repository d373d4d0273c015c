package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The encoders and decoders of {@link PullFormat}. Each works on heap arrays, where C2
 * vectorises the loops ({@link Float#floatToFloat16} and {@link Float#float16ToFloat} are
 * intrinsics; int8 rounds with an add of {@code 1.5 x 2^23} instead of {@link Math#round}, which
 * is not vectorised): a segment is copied into a per-thread array first, or out of one after.
 * Measured single-threaded on 64-weight rows (C2): encode f16 0.18, bf16 0.45, int8 1.83 ns per
 * weight from an array; through per-element segment accesses it was 2.0, 1.7 and 5.9
 * ({@code docs/pull-formats.md}). Stateless but
 * for the per-thread scratch arrays; any thread.
 */
final class PullCodec {

    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** The largest finite binary16. */
    static final float F16_MAX = 65504f;
    /** The largest finite bfloat16, as f32 bits. */
    static final int BF16_MAX_BITS = 0x7F7F0000;
    /** Below this row maximum, int8 scales are computed in double (127 / m would overflow f32). */
    static final float INT8_SMALL = 0x1p-100f;
    /** Added to a float of magnitude below 2^22, it leaves the value rounded half-even to an integer in the low mantissa bits. */
    private static final float ROUNDER = 0x1.8p23f;
    private static final int ROUNDER_BITS = Float.floatToRawIntBits(ROUNDER);
    /** Weights per pass through the scratch arrays. */
    private static final int PASS = 1 << 14;

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /** One thread's arrays; they grow to the widest row seen. */
    private static final class Scratch {
        float[] floats = new float[PASS];
        short[] shorts = new short[PASS];
        byte[] bytes = new byte[PASS];

        Scratch fit(int n) {
            if (floats.length < n) {
                floats = new float[n];
                shorts = new short[n];
                bytes = new byte[n];
            }
            return this;
        }
    }

    private PullCodec() {
    }

    /** Encodes {@code count} rows of f32 at {@code src[srcAt]} (a segment), in passes through the scratch arrays. */
    static void encode(PullFormat format, MemorySegment src, long srcAt, int count, int dimension, MemorySegment dst,
            long dstAt) {
        if (format == PullFormat.F32) {
            MemorySegment.copy(src, srcAt, dst, dstAt, (long) count * dimension * Float.BYTES);
            return;
        }
        int rowsPerPass = Math.max(1, PASS / Math.max(1, dimension));
        Scratch s = SCRATCH.get().fit(dimension);
        long rowBytes = (long) dimension * Float.BYTES;
        for (int from = 0; from < count; from += rowsPerPass) {
            int n = Math.min(rowsPerPass, count - from);
            MemorySegment.copy(src, FLOAT, srcAt + from * rowBytes, s.floats, 0, n * dimension);
            encode(format, s.floats, n, dimension, dst, dstAt + from * format.rowBytes(dimension), s);
        }
    }

    /** Encodes {@code count} rows of {@code dimension} floats at the start of {@code src} into {@code dst[dstAt]}. */
    static void encode(PullFormat format, float[] src, int count, int dimension, MemorySegment dst, long dstAt) {
        encode(format, src, count, dimension, dst, dstAt, SCRATCH.get().fit(dimension));
    }

    private static void encode(PullFormat format, float[] src, int count, int dimension, MemorySegment dst, long dstAt,
            Scratch s) {
        int n = count * dimension;
        switch (format) {
            case F32 -> MemorySegment.copy(src, 0, dst, FLOAT, dstAt, n);
            case F16 -> {
                for (int from = 0; from < n; from += s.shorts.length) {
                    int m = Math.min(s.shorts.length, n - from);
                    toF16(src, from, s.shorts, m);
                    MemorySegment.copy(s.shorts, 0, dst, SHORT, dstAt + (long) from * Short.BYTES, m);
                }
            }
            case BF16 -> {
                for (int from = 0; from < n; from += s.shorts.length) {
                    int m = Math.min(s.shorts.length, n - from);
                    short[] h = s.shorts;
                    for (int i = 0; i < m; i++) {
                        h[i] = toBf16(src[from + i]);
                    }
                    MemorySegment.copy(h, 0, dst, SHORT, dstAt + (long) from * Short.BYTES, m);
                }
            }
            case INT8 -> {
                long rowBytes = format.rowBytes(dimension);
                for (int r = 0; r < count; r++) {
                    encodeInt8Row(src, r * dimension, dimension, s.bytes, dst, dstAt + r * rowBytes);
                }
            }
        }
    }

    /** Decodes one row of {@code dimension} weights at {@code src[srcAt]} into f32 at {@code dst[dstAt]}. */
    static void decodeRow(PullFormat format, MemorySegment src, long srcAt, int dimension, MemorySegment dst, long dstAt) {
        if (format == PullFormat.F32) {
            MemorySegment.copy(src, srcAt, dst, dstAt, (long) dimension * Float.BYTES);
            return;
        }
        Scratch s = SCRATCH.get().fit(dimension);
        decodeRow(format, src, srcAt, dimension, s.floats, 0, s);
        MemorySegment.copy(s.floats, 0, dst, FLOAT, dstAt, dimension);
    }

    /** Decodes one row at {@code src[srcAt]} into {@code dst[dstIndex, dstIndex + dimension)}. */
    static void decodeRow(PullFormat format, MemorySegment src, long srcAt, int dimension, float[] dst, int dstIndex) {
        decodeRow(format, src, srcAt, dimension, dst, dstIndex, SCRATCH.get().fit(dimension));
    }

    private static void decodeRow(PullFormat format, MemorySegment src, long srcAt, int dimension, float[] dst,
            int dstIndex, Scratch s) {
        switch (format) {
            case F32 -> MemorySegment.copy(src, FLOAT, srcAt, dst, dstIndex, dimension);
            case F16 -> {
                short[] h = s.shorts;
                MemorySegment.copy(src, SHORT, srcAt, h, 0, dimension);
                for (int i = 0; i < dimension; i++) {
                    dst[dstIndex + i] = Float.float16ToFloat(h[i]);
                }
            }
            case BF16 -> {
                short[] h = s.shorts;
                MemorySegment.copy(src, SHORT, srcAt, h, 0, dimension);
                for (int i = 0; i < dimension; i++) {
                    dst[dstIndex + i] = Float.intBitsToFloat(h[i] << 16);
                }
            }
            case INT8 -> {
                float m = src.get(FLOAT, srcAt);
                byte[] q = s.bytes;
                MemorySegment.copy(src, ValueLayout.JAVA_BYTE, srcAt + Float.BYTES, q, 0, dimension);
                if (m >= INT8_SMALL) {
                    float k = m / 127f;
                    for (int i = 0; i < dimension; i++) {
                        // Clamped to the row's range: 127 * (m / 127) may round past m (to infinity at f32's maximum).
                        dst[dstIndex + i] = Math.max(-m, Math.min(m, q[i] * k));
                    }
                } else {
                    double k = m / 127.0;
                    for (int i = 0; i < dimension; i++) {
                        dst[dstIndex + i] = Math.max(-m, Math.min(m, (float) (q[i] * k)));
                    }
                }
            }
        }
    }

    /** A loop of its own, so that C2 compiles and vectorises it whole. */
    private static void toF16(float[] src, int from, short[] h, int n) {
        for (int i = 0; i < n; i++) {
            h[i] = Float.floatToFloat16(Math.max(-F16_MAX, Math.min(F16_MAX, src[from + i])));
        }
    }

    /** Round to nearest even on the upper 16 bits; a finite value that would round to infinity saturates. */
    static short toBf16(float x) {
        int bits = Float.floatToRawIntBits(x);
        int rounded = bits + 0x7FFF + ((bits >>> 16) & 1);
        if ((rounded & 0x7F800000) == 0x7F800000 && (bits & 0x7F800000) != 0x7F800000) {
            rounded = (bits & 0x80000000) | BF16_MAX_BITS;
        }
        return (short) (rounded >>> 16);
    }

    private static void encodeInt8Row(float[] src, int at, int dimension, byte[] q, MemorySegment dst, long out) {
        float m = 0;
        for (int i = 0; i < dimension; i++) {
            m = Math.max(m, Math.abs(src[at + i]));
        }
        if (m >= INT8_SMALL) {
            float inv = 127f / m;
            for (int i = 0; i < dimension; i++) {
                // |v| <= 127 (and a rounding): the add rounds it half-even to an integer, which the bits then hold.
                float v = src[at + i] * inv;
                int r = Float.floatToRawIntBits(v + ROUNDER) - ROUNDER_BITS;
                q[i] = (byte) Math.max(-127, Math.min(127, r));
            }
        } else {
            double inv = m == 0 ? 0 : 127.0 / m;
            for (int i = 0; i < dimension; i++) {
                q[i] = (byte) Math.max(-127, Math.min(127, Math.rint(src[at + i] * inv)));
            }
        }
        dst.set(FLOAT, out, m);
        MemorySegment.copy(q, 0, dst, ValueLayout.JAVA_BYTE, out + Float.BYTES, dimension);
    }
}
