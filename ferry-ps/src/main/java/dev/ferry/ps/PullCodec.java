package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The encoders and decoders of {@link PullFormat}: plain counted loops over segments, one
 * element at a time, which C2 can unroll and vectorise ({@link Float#floatToFloat16} and
 * {@link Float#float16ToFloat} are intrinsics). Stateless; any thread.
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

    private PullCodec() {
    }

    static void encode(PullFormat format, MemorySegment src, long srcAt, int count, int dimension, MemorySegment dst,
            long dstAt) {
        long n = (long) count * dimension;
        switch (format) {
            case F32 -> MemorySegment.copy(src, srcAt, dst, dstAt, n * Float.BYTES);
            case F16 -> {
                for (long i = 0; i < n; i++) {
                    float x = src.get(FLOAT, srcAt + i * Float.BYTES);
                    x = Math.max(-F16_MAX, Math.min(F16_MAX, x));
                    dst.set(SHORT, dstAt + i * Short.BYTES, Float.floatToFloat16(x));
                }
            }
            case BF16 -> {
                for (long i = 0; i < n; i++) {
                    dst.set(SHORT, dstAt + i * Short.BYTES, toBf16(src.get(FLOAT, srcAt + i * Float.BYTES)));
                }
            }
            case INT8 -> {
                long rowBytes = format.rowBytes(dimension);
                for (int r = 0; r < count; r++) {
                    encodeInt8Row(src, srcAt + (long) r * dimension * Float.BYTES, dimension, dst, dstAt + r * rowBytes);
                }
            }
        }
    }

    static void decodeRow(PullFormat format, MemorySegment src, long srcAt, int dimension, MemorySegment dst, long dstAt) {
        switch (format) {
            case F32 -> MemorySegment.copy(src, srcAt, dst, dstAt, (long) dimension * Float.BYTES);
            case F16 -> {
                for (int i = 0; i < dimension; i++) {
                    dst.set(FLOAT, dstAt + (long) i * Float.BYTES,
                            Float.float16ToFloat(src.get(SHORT, srcAt + (long) i * Short.BYTES)));
                }
            }
            case BF16 -> {
                for (int i = 0; i < dimension; i++) {
                    dst.set(FLOAT, dstAt + (long) i * Float.BYTES,
                            Float.intBitsToFloat(src.get(SHORT, srcAt + (long) i * Short.BYTES) << 16));
                }
            }
            case INT8 -> decodeInt8Row(src, srcAt, dimension, dst, dstAt);
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

    private static void encodeInt8Row(MemorySegment src, long at, int dimension, MemorySegment dst, long out) {
        float m = 0;
        for (int i = 0; i < dimension; i++) {
            m = Math.max(m, Math.abs(src.get(FLOAT, at + (long) i * Float.BYTES)));
        }
        dst.set(FLOAT, out, m);
        long q = out + Float.BYTES;
        if (m == 0) {
            dst.asSlice(q, dimension).fill((byte) 0);
        } else if (m >= INT8_SMALL) {
            float inv = 127f / m;
            for (int i = 0; i < dimension; i++) {
                int v = Math.round(src.get(FLOAT, at + (long) i * Float.BYTES) * inv);
                dst.set(ValueLayout.JAVA_BYTE, q + i, (byte) Math.max(-127, Math.min(127, v)));
            }
        } else {
            double inv = 127.0 / m;
            for (int i = 0; i < dimension; i++) {
                long v = Math.round(src.get(FLOAT, at + (long) i * Float.BYTES) * inv);
                dst.set(ValueLayout.JAVA_BYTE, q + i, (byte) Math.max(-127, Math.min(127, v)));
            }
        }
    }

    private static void decodeInt8Row(MemorySegment src, long at, int dimension, MemorySegment dst, long out) {
        float m = src.get(FLOAT, at);
        long q = at + Float.BYTES;
        if (m >= INT8_SMALL) {
            float k = m / 127f;
            for (int i = 0; i < dimension; i++) {
                // Clamped to the row's range: 127 * (m / 127) may round past m (to infinity at f32's maximum).
                float d = src.get(ValueLayout.JAVA_BYTE, q + i) * k;
                dst.set(FLOAT, out + (long) i * Float.BYTES, Math.max(-m, Math.min(m, d)));
            }
        } else {
            double k = m / 127.0;
            for (int i = 0; i < dimension; i++) {
                float d = (float) (src.get(ValueLayout.JAVA_BYTE, q + i) * k);
                dst.set(FLOAT, out + (long) i * Float.BYTES, Math.max(-m, Math.min(m, d)));
            }
        }
    }
}
