package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

/**
 * Every format's documented bound, element by element, on rows that reach its corners: zeros,
 * f32 denormals, the format's own subnormals, binade edges, ties, the largest magnitudes and
 * beyond the format's range. The bounds are computed in double, where they are exact.
 */
class PullFormatTest {

    private static final float BF16_MAX = Float.intBitsToFloat(0x7F7F0000);

    /** The documented bound of one element {@code x} of a row whose largest magnitude is {@code m}. */
    static double bound(PullFormat format, float x, float m) {
        double ax = Math.abs((double) x);
        return switch (format) {
            case F32 -> 0;
            case F16 -> ax <= 65504 ? Math.max(0x1p-11 * ax, 0x1p-25) : ax - 65504;
            case BF16 -> ax <= BF16_MAX ? Math.max(0x1p-8 * ax, 0x1p-134) : ax - BF16_MAX;
            case INT8 -> m * (1.0 / 254 + 0x1p-21) + 0x1p-149;
        };
    }

    /** Rows that reach the corners of every format, each of {@code dimension} floats. */
    static List<float[]> corners(int dimension) {
        List<float[]> rows = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(21);
        rows.add(new float[dimension]); // zeros
        float[] negZero = new float[dimension];
        java.util.Arrays.fill(negZero, -0f);
        rows.add(negZero);
        float[] specials = {Float.MIN_VALUE, -Float.MIN_VALUE, Float.MIN_NORMAL, 0x1p-127f, 0x1.fffffcp-127f, 0x1p-24f,
            0x1p-25f, 0x1.8p-25f, 0x1p-14f, 0x1.ffcp-15f, 65504f, 65519f, 65520f, -65520f, 1e5f, -3e38f,
            Float.MAX_VALUE, -Float.MAX_VALUE, BF16_MAX, Math.nextUp(BF16_MAX), 1f, -1f, 1.00048828125f,
            1.001953125f, 0.1f, 1f / 3, 2049f, 4097f, 257f, 0.00006103515625f};
        for (int from = 0; from < specials.length; from += dimension) {
            float[] row = new float[dimension];
            for (int i = 0; i < dimension; i++) {
                row[i] = specials[(from + i) % specials.length];
            }
            rows.add(row);
        }
        for (float scale : new float[] {Float.MIN_VALUE * 3, 1e-40f, 1e-38f, 1e-31f, 1e-20f, 1e-6f, 0.01f, 1f, 100f,
            6e4f, 1e10f, 1e30f, 3e38f}) {
            for (int k = 0; k < 20; k++) {
                float[] row = new float[dimension];
                for (int i = 0; i < dimension; i++) {
                    row[i] = (float) ((random.nextDouble() * 2 - 1) * scale);
                }
                rows.add(row);
            }
        }
        // Ties of every format: halfway between two f16, bf16 and int8 steps.
        float[] ties = new float[dimension];
        for (int i = 0; i < dimension; i++) {
            ties[i] = switch (i % 4) {
                case 0 -> 1f + 0x1p-11f * (2 * i + 1);
                case 1 -> 1f + 0x1p-8f * (2 * i + 1);
                case 2 -> (i + 0.5f) / 127f;
                default -> -1f;
            };
        }
        rows.add(ties);
        return rows;
    }

    @Test
    void everyElementIsWithinItsFormatsBound() {
        for (int dimension : new int[] {1, 3, 8, 17, 64}) {
            List<float[]> rows = corners(dimension);
            for (PullFormat format : PullFormat.values()) {
                double worst = 0;
                for (float[] row : rows) {
                    float[] decoded = roundTrip(format, row);
                    float m = 0;
                    for (float x : row) {
                        m = Math.max(m, Math.abs(x));
                    }
                    for (int i = 0; i < dimension; i++) {
                        float d = decoded[i];
                        assertTrue(Float.isFinite(d), format + " decoded " + row[i] + " to " + d);
                        double err = Math.abs((double) d - row[i]);
                        double b = bound(format, row[i], m);
                        assertTrue(err <= b, format + ": " + row[i] + " decoded to " + d + ", error " + err
                                + " above the bound " + b + " (row max " + m + ", dimension " + dimension + ")");
                        if (b > 0) {
                            worst = Math.max(worst, err / b);
                        }
                    }
                }
                if (dimension == 64) {
                    System.out.printf("%s: worst error %.3f of its bound (%d rows of 64)%n", format, worst, rows.size());
                }
            }
        }
    }

    @Test
    void f32IsExactAndZerosStayZeros() {
        float[] row = {0f, -0f, Float.MIN_VALUE, 1.2345678f, -Float.MAX_VALUE};
        float[] back = roundTrip(PullFormat.F32, row);
        for (int i = 0; i < row.length; i++) {
            assertEquals(Float.floatToRawIntBits(row[i]), Float.floatToRawIntBits(back[i]));
        }
        for (PullFormat format : PullFormat.values()) {
            for (float v : roundTrip(format, new float[9])) {
                assertEquals(0f, v, format.toString());
            }
        }
    }

    @Test
    void formatsRoundToNearestEvenAndSaturate() {
        // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10: even is 1.
        assertEquals(1f, roundTrip(PullFormat.F16, new float[] {1f + 0x1p-11f})[0]);
        assertEquals(1f + 0x1p-9f, roundTrip(PullFormat.F16, new float[] {1f + 0x1.8p-10f})[0]);
        assertEquals(65504f, roundTrip(PullFormat.F16, new float[] {Float.MAX_VALUE})[0]);
        assertEquals(-65504f, roundTrip(PullFormat.F16, new float[] {-1e9f})[0]);
        // bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1.
        assertEquals(1f, roundTrip(PullFormat.BF16, new float[] {1f + 0x1p-8f})[0]);
        assertEquals(1f + 0x1p-6f, roundTrip(PullFormat.BF16, new float[] {1f + 0x1.8p-7f})[0]);
        assertEquals(BF16_MAX, roundTrip(PullFormat.BF16, new float[] {Float.MAX_VALUE})[0]);
        assertEquals(-BF16_MAX, roundTrip(PullFormat.BF16, new float[] {-Float.MAX_VALUE})[0]);
        // int8: the row's largest magnitude comes back exactly, with its sign.
        float[] back = roundTrip(PullFormat.INT8, new float[] {0.5f, -2f, 1f});
        assertEquals(-2f, back[1]);
        assertEquals(Float.MIN_VALUE, roundTrip(PullFormat.INT8, new float[] {Float.MIN_VALUE, 0f})[0]);
    }

    @Test
    void encodedSizesAreWhatTheWireCarries() {
        assertEquals(4 * 64, PullFormat.F32.rowBytes(64));
        assertEquals(2 * 64, PullFormat.F16.rowBytes(64));
        assertEquals(2 * 64, PullFormat.BF16.rowBytes(64));
        assertEquals(4 + 64, PullFormat.INT8.rowBytes(64));
        assertEquals(10 * (4 + 7), PullFormat.INT8.rowsBytes(10, 7));
        for (PullFormat format : PullFormat.values()) {
            assertEquals(format, PullFormat.ofCode(format.code()));
            assertEquals(format, PullFormat.parse(format.toString().toUpperCase(java.util.Locale.ROOT)));
        }
        assertEquals(PsException.Code.INVALID_ARGUMENT, assertThrows(PsException.class, () -> PullFormat.ofCode(4)).code());
        assertEquals(PsException.Code.INVALID_ARGUMENT, assertThrows(PsException.class, () -> PullFormat.parse("fp8")).code());
    }

    @Test
    void severalRowsEncodeBackToBack() {
        int d = 5;
        int n = 7;
        SplittableRandom random = new SplittableRandom(3);
        float[] rows = new float[n * d];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = (float) random.nextGaussian() * (i / d + 1);
        }
        for (PullFormat format : PullFormat.values()) {
            byte[] wire = new byte[(int) format.rowsBytes(n, d) + 3];
            format.encode(MemorySegment.ofArray(rows), 0, n, d, MemorySegment.ofArray(wire), 3);
            for (int r = 0; r < n; r++) {
                float[] one = java.util.Arrays.copyOfRange(rows, r * d, (r + 1) * d);
                float[] alone = roundTrip(format, one);
                float[] inBatch = new float[d];
                format.decodeRow(MemorySegment.ofArray(wire), 3 + r * format.rowBytes(d), d,
                        MemorySegment.ofArray(inBatch), 0);
                for (int i = 0; i < d; i++) {
                    assertEquals(Float.floatToRawIntBits(alone[i]), Float.floatToRawIntBits(inBatch[i]),
                            format + " row " + r + " element " + i);
                }
            }
        }
    }

    static float[] roundTrip(PullFormat format, float[] row) {
        byte[] wire = new byte[(int) format.rowBytes(row.length)];
        format.encode(MemorySegment.ofArray(row), 0, 1, row.length, MemorySegment.ofArray(wire), 0);
        float[] back = new float[row.length];
        format.decodeRow(MemorySegment.ofArray(wire), 0, row.length, MemorySegment.ofArray(back), 0);
        return back;
    }
}
