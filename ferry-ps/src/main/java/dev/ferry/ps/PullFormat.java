package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * How the rows of a pull travel from server to client: the server encodes its f32 weights into
 * the reply buffer in this format, the client decodes them into the caller's {@code float[]}.
 * Weights are stored and updated in f32 whatever the format; only the copy on the wire is
 * smaller. The bounds below hold per element {@code x} (finite, as every stored weight is) and
 * decoded value {@code d}; {@code docs/pull-formats.md} derives them, {@code PullFormatTest}
 * checks them element by element.
 *
 * <ul>
 *   <li>{@link #F32}: 4 bytes per weight, exact.</li>
 *   <li>{@link #F16}: 2 bytes, IEEE binary16 rounded to nearest even.
 *       {@code |d - x| <= max(2^-11 |x|, 2^-25)} for {@code |x| <= 65504}; larger magnitudes
 *       saturate to {@code ±65504} (never infinity).</li>
 *   <li>{@link #BF16}: 2 bytes, the upper half of the f32 rounded to nearest even.
 *       {@code |d - x| <= max(2^-8 |x|, 2^-134)} for {@code |x| <= 3.3895314e38}; larger
 *       magnitudes saturate to {@code ±3.3895314e38}.</li>
 *   <li>{@link #INT8}: 4 + 1 per weight: per row its largest magnitude {@code m} (f32), then one
 *       signed byte per weight, {@code q = round(127 x / m)}; {@code d = q m / 127}.
 *       {@code |d - x| <= m (1/254 + 2^-21) + 2^-149}; a row of zeros decodes to zeros
 *       exactly.</li>
 * </ul>
 */
public enum PullFormat {

    /** Four bytes per weight, exact. */
    F32(0),
    /** IEEE binary16: two bytes per weight, 11 significant bits. */
    F16(1),
    /** bfloat16: two bytes per weight, 8 significant bits, the f32 exponent range. */
    BF16(2),
    /** One signed byte per weight and one f32 scale per row. */
    INT8(3);

    private final int code;

    PullFormat(int code) {
        this.code = code;
    }

    /** Its code on the wire (the {@code offset} field of a {@code PULL} request). */
    public int code() {
        return code;
    }

    /**
     * The format of a wire code.
     *
     * @throws PsException {@code INVALID_ARGUMENT} for an unknown code
     */
    public static PullFormat ofCode(int code) {
        return switch (code) {
            case 0 -> F32;
            case 1 -> F16;
            case 2 -> BF16;
            case 3 -> INT8;
            default -> throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown pull format " + code
                    + "; known: 0 f32, 1 f16, 2 bf16, 3 int8");
        };
    }

    /**
     * The format named {@code f32}, {@code f16}, {@code bf16} or {@code int8} (any case).
     *
     * @throws PsException {@code INVALID_ARGUMENT} for another name
     */
    public static PullFormat parse(String name) {
        for (PullFormat f : values()) {
            if (f.name().equalsIgnoreCase(name.strip())) {
                return f;
            }
        }
        throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown pull format '" + name
                + "'; known: f32, f16, bf16, int8");
    }

    /** Bytes of one encoded row of {@code dimension} weights. */
    public long rowBytes(int dimension) {
        return switch (this) {
            case F32 -> (long) dimension * Float.BYTES;
            case F16, BF16 -> (long) dimension * Short.BYTES;
            case INT8 -> Float.BYTES + (long) dimension;
        };
    }

    /** Bytes of {@code count} encoded rows. */
    public long rowsBytes(int count, int dimension) {
        return count * rowBytes(dimension);
    }

    /**
     * Encodes {@code count} rows of {@code dimension} little-endian f32 at {@code src[srcAt]} into
     * {@code dst[dstAt]}, back to back.
     */
    public void encode(MemorySegment src, long srcAt, int count, int dimension, MemorySegment dst, long dstAt) {
        PullCodec.encode(this, src, srcAt, count, dimension, dst, dstAt);
    }

    /**
     * Encodes {@code count} rows of {@code dimension} floats at the start of {@code rows} into
     * {@code dst[dstAt]}, back to back; the same bytes as {@link #encode(MemorySegment, long, int, int,
     * MemorySegment, long)}, without copying the rows into a scratch array first.
     */
    public void encode(float[] rows, int count, int dimension, MemorySegment dst, long dstAt) {
        PullCodec.encode(this, rows, count, dimension, dst, dstAt);
    }

    /** Decodes one row at {@code src[srcAt]} into {@code dst[dstIndex, dstIndex + dimension)}. */
    public void decodeRow(MemorySegment src, long srcAt, int dimension, float[] dst, int dstIndex) {
        PullCodec.decodeRow(this, src, srcAt, dimension, dst, dstIndex);
    }

    /**
     * Decodes one row of {@code dimension} weights at {@code src[srcAt]} into little-endian f32 at
     * {@code dst[dstAt]}.
     */
    public void decodeRow(MemorySegment src, long srcAt, int dimension, MemorySegment dst, long dstAt) {
        PullCodec.decodeRow(this, src, srcAt, dimension, dst, dstAt);
    }

    /** The name used on the command line: {@code f32}, {@code f16}, {@code bf16}, {@code int8}. */
    @Override
    public String toString() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
