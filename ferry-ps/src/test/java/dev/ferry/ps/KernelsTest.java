package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The vector kernels give the same bits as the scalar ones (which the reference tests check
 * against double precision), for every dimension: whole vectors, a tail, and rows shorter than
 * one vector.
 */
class KernelsTest {

    private static final int[] DIMENSIONS = {1, 3, 8, 15, 16, 17, 32, 37, 64, 100, 128};

    @Test
    void theBuildRunsTestsWithTheVectorApi() {
        assertTrue(Kernels.VECTOR, "surefire must pass --add-modules=jdk.incubator.vector: " + Kernels.describe());
    }

    @Test
    void optimizerStepsAreTheSameBitsBothWays() {
        SplittableRandom random = new SplittableRandom(3);
        try (Arena arena = Arena.ofConfined()) {
            for (int dimension : DIMENSIONS) {
                for (int trial = 0; trial < 20; trial++) {
                    long rowBytes = 16 + 12L * dimension;
                    MemorySegment scalar = arena.allocate(rowBytes + 4, 8).asSlice(4);
                    MemorySegment vector = arena.allocate(rowBytes + 4, 8).asSlice(4);
                    MemorySegment g = arena.allocate(4L * dimension + 4).asSlice(4);
                    for (int j = 0; j < 3 * dimension; j++) {
                        // weights of either sign; accumulators >= 0, some exactly 0
                        float value = j < dimension ? (float) random.nextDouble(-2, 2)
                                : trial % 4 == 0 ? 0f : (float) random.nextDouble(0, 3);
                        scalar.set(RowLayout.FLOAT, 16 + 4L * j, value);
                    }
                    for (int j = 0; j < dimension; j++) {
                        g.set(RowLayout.FLOAT, 4L * j, trial % 5 == 0 && j % 3 == 0 ? 0f
                                : (float) random.nextDouble(-1, 1));
                    }
                    long w = 16;
                    long s0 = w + 4L * dimension;
                    long s1 = s0 + 4L * dimension;
                    for (int kind = 0; kind < 4; kind++) {
                        MemorySegment.copy(scalar, 0, vector, 0, rowBytes);
                        switch (kind) {
                            case 0 -> {
                                ScalarKernels.sgd(scalar, w, g, 0, dimension, 0.05f);
                                VectorKernels.sgd(vector, w, g, 0, dimension, 0.05f);
                            }
                            case 1 -> {
                                ScalarKernels.adagrad(scalar, w, s0, g, 0, dimension, 0.1f, 1e-10f);
                                VectorKernels.adagrad(vector, w, s0, g, 0, dimension, 0.1f, 1e-10f);
                            }
                            case 2 -> {
                                ScalarKernels.adam(scalar, w, s0, s1, g, 0, dimension, 0.9f, 0.1f, 0.999f, 0.001f,
                                        0.003f, 3e-10f);
                                VectorKernels.adam(vector, w, s0, s1, g, 0, dimension, 0.9f, 0.1f, 0.999f, 0.001f,
                                        0.003f, 3e-10f);
                            }
                            default -> {
                                ScalarKernels.ftrl(scalar, w, s0, s1, g, 0, dimension, 10f, 1f, trial % 2 * 0.5f,
                                        0.1f);
                                VectorKernels.ftrl(vector, w, s0, s1, g, 0, dimension, 10f, 1f, trial % 2 * 0.5f,
                                        0.1f);
                            }
                        }
                        assertArrayEquals(scalar.toArray(ValueLayout.JAVA_BYTE), vector.toArray(ValueLayout.JAVA_BYTE),
                                "optimizer " + kind + ", dimension " + dimension + ", trial " + trial);
                    }
                }
            }
        }
    }

    /**
     * Past its table of step sizes, an Adam step uses the bias corrections of the formula,
     * {@code lr sqrt(1 - b2^t) / (1 - b1^t)} and {@code eps sqrt(1 - b2^t)} in double rounded to
     * f32, bit for bit: with the usual betas (1 - b1^t is 1 there), b1 = 0, and a b1 so close to
     * 1 that its correction still counts.
     */
    @Test
    void adamStepsPastTheTableUseTheFormulasStepSizes() {
        int dimension = 37;
        SplittableRandom random = new SplittableRandom(4);
        Optimizer.Adam[] rules = {(Optimizer.Adam) Optimizer.adam(0.001), new Optimizer.Adam(0.01, 0, 0.999, 1e-8),
            new Optimizer.Adam(0.002, 0.999999, 0.9999, 1e-7)};
        long[] steps = {4097, 4100, 5000, 10_000, 23_000, 60_000, 200_000, 1_000_000};
        try (Arena arena = Arena.ofConfined()) {
            long w = 0;
            long stepsAt = 4L * dimension + 4; // 8-aligned
            long s0 = stepsAt + 8;
            long s1 = s0 + 4L * dimension;
            long rowBytes = s1 + 4L * dimension;
            MemorySegment row = arena.allocate(rowBytes, 8);
            MemorySegment expected = arena.allocate(rowBytes, 8);
            MemorySegment g = arena.allocate(4L * dimension, 8);
            for (Optimizer.Adam rule : rules) {
                OptimizerKernel kernel = new OptimizerKernel(rule, Initializer.zeros());
                double saturated = Math.max(Math.log(1e-10) / Math.log(rule.beta1()),
                        Math.log(1e-10) / Math.log(rule.beta2()));
                for (long t : steps) {
                    if (t >= saturated) {
                        continue; // past saturation the plain rate and epsilon are used
                    }
                    for (int j = 0; j < dimension; j++) {
                        row.set(RowLayout.FLOAT, w + 4L * j, (float) random.nextDouble(-2, 2));
                        row.set(RowLayout.FLOAT, s0 + 4L * j, (float) random.nextDouble(-1, 1));
                        row.set(RowLayout.FLOAT, s1 + 4L * j, (float) random.nextDouble(0, 1));
                        g.set(RowLayout.FLOAT, 4L * j, (float) random.nextDouble(-1, 1));
                    }
                    row.set(RowLayout.LONG, stepsAt, t - 1);
                    MemorySegment.copy(row, 0, expected, 0, rowBytes);
                    expected.set(RowLayout.LONG, stepsAt, t);
                    float scale = (float) (rule.learningRate() * Math.sqrt(1 - Math.exp(t * Math.log(rule.beta2())))
                            / (1 - Math.exp(t * Math.log(rule.beta1()))));
                    float epsHat = (float) (rule.epsilon() * Math.sqrt(1 - Math.exp(t * Math.log(rule.beta2()))));
                    ScalarKernels.adam(expected, w, s0, s1, g, 0, dimension, (float) rule.beta1(),
                            (float) (1 - rule.beta1()), (float) rule.beta2(), (float) (1 - rule.beta2()), scale,
                            epsHat);
                    kernel.step(row, w, stepsAt, s0, dimension, g, 0);
                    assertArrayEquals(expected.toArray(ValueLayout.JAVA_BYTE), row.toArray(ValueLayout.JAVA_BYTE),
                            rule + ", step " + t);
                }
            }
        }
    }

    /**
     * Past its table Adam takes {@code b2^t} as a product of two tabled powers, not
     * {@code exp(t ln b2)}: the two differ by a few units of a double's last place, and for every
     * step count from the table's end to saturation (or 70,000) the f32 step size and epsilon
     * made from either are the same bits.
     */
    @Test
    void adamsTabledPowersGiveTheFormulasStepSizesAtEveryStepCount() {
        Optimizer.Adam[] rules = {(Optimizer.Adam) Optimizer.adam(0.001), new Optimizer.Adam(0.01, 0, 0.999, 1e-8),
            new Optimizer.Adam(0.002, 0.999999, 0.9999, 1e-7), new Optimizer.Adam(0.05, 0.8, 0.998, 1e-6),
            new Optimizer.Adam(0.001, 0.9, 0.99, 1e-8)};
        for (Optimizer.Adam rule : rules) {
            OptimizerKernel kernel = new OptimizerKernel(rule, Initializer.zeros());
            double logB1 = Math.log(rule.beta1());
            double logB2 = Math.log(rule.beta2());
            double saturated = Math.max(Math.log(1e-10) / logB1, Math.log(1e-10) / logB2);
            for (long t = 4097; t < Math.min(saturated, 70_000); t++) {
                double formula = Math.exp(t * logB2);
                double tabled = kernel.adamPowerB2(t);
                assertTrue(Math.abs(tabled - formula) <= 64 * Math.ulp(formula), rule + ", step " + t);
                double c1 = 1 - Math.exp(t * logB1);
                double root = Math.sqrt(1 - formula);
                double rootTabled = Math.sqrt(1 - tabled);
                assertEquals((float) (rule.learningRate() * root / c1), (float) (rule.learningRate() * rootTabled / c1),
                        rule + ", step " + t);
                assertEquals((float) (rule.epsilon() * root), (float) (rule.epsilon() * rootTabled), rule + ", step " + t);
            }
        }
    }

    @Test
    void sumsAreTheSameBitsOnEveryPathAndStartFromPositiveZero() {
        SplittableRandom random = new SplittableRandom(4);
        try (Arena arena = Arena.ofConfined()) {
            for (int dimension : DIMENSIONS) {
                MemorySegment in = arena.allocate(4L * dimension);
                for (int j = 0; j < dimension; j++) {
                    in.set(RowLayout.FLOAT, 4L * j, j % 4 == 0 ? -0f : (float) random.nextDouble(-1, 1));
                }
                // A sum starts from zero (BatchPlan.sumGradients zeroes its rows), so -0 becomes +0.
                MemorySegment scalar = arena.allocate(4L * dimension);
                MemorySegment vector = arena.allocate(4L * dimension);
                MemorySegment dispatched = arena.allocate(4L * dimension);
                for (int k = 0; k < 4; k++) {
                    ScalarKernels.add(scalar, 0, in, 0, dimension);
                    VectorKernels.add(vector, 0, in, 0, dimension);
                    Kernels.add(dispatched, 0, in, 0, dimension); // a constant width for 32, 64 and 128
                    if (k == 0) {
                        assertEquals(0, Float.floatToRawIntBits(vector.get(RowLayout.FLOAT, 0)), "0 + -0 is +0");
                    }
                }
                assertArrayEquals(scalar.toArray(ValueLayout.JAVA_BYTE), vector.toArray(ValueLayout.JAVA_BYTE));
                assertArrayEquals(scalar.toArray(ValueLayout.JAVA_BYTE), dispatched.toArray(ValueLayout.JAVA_BYTE),
                        "dimension " + dimension);
            }
        }
    }

    /**
     * The row-list sum (one call per part) gives, on both paths, the bits of one {@link
     * ScalarKernels#add} per listed row in list order, rows repeated and in any order.
     */
    @Test
    void rowListSumsAreTheSameBitsAsOneAddPerRow() {
        SplittableRandom random = new SplittableRandom(5);
        int rows = 40;
        int outRows = 9;
        try (Arena arena = Arena.ofConfined()) {
            for (int dimension : DIMENSIONS) {
                MemorySegment in = arena.allocate(4L * dimension * rows, 64);
                for (long j = 0; j < (long) dimension * rows; j++) {
                    in.set(RowLayout.FLOAT, 4 * j, (float) random.nextDouble(-1, 1));
                }
                int[] inRow = randomRows(random, rows, rows);
                int[] outRow = randomRows(random, rows, outRows);
                MemorySegment expected = arena.allocate(4L * dimension * outRows, 64);
                MemorySegment scalar = arena.allocate(4L * dimension * outRows, 64);
                MemorySegment vector = arena.allocate(4L * dimension * outRows, 64);
                MemorySegment dispatched = arena.allocate(4L * dimension * outRows, 64);
                long rowBytes = 4L * dimension;
                for (int k = 3; k < rows - 2; k++) {
                    ScalarKernels.add(expected, outRow[k] * rowBytes, in, inRow[k] * rowBytes, dimension);
                }
                ScalarKernels.addRows(scalar, outRow, in, inRow, 3, rows - 2, dimension);
                VectorKernels.addRows(vector, outRow, in, inRow, 3, rows - 2, dimension);
                Kernels.addRows(dispatched, outRow, in, inRow, 3, rows - 2, dimension);
                byte[] want = expected.toArray(ValueLayout.JAVA_BYTE);
                assertArrayEquals(want, scalar.toArray(ValueLayout.JAVA_BYTE), "scalar, dimension " + dimension);
                assertArrayEquals(want, vector.toArray(ValueLayout.JAVA_BYTE), "vector, dimension " + dimension);
                assertArrayEquals(want, dispatched.toArray(ValueLayout.JAVA_BYTE), "dispatched, dimension " + dimension);
            }
        }
    }

    /** {@code count} row numbers in {@code [0, bound)}, repeats allowed. */
    private static int[] randomRows(SplittableRandom random, int count, int bound) {
        return random.ints(count, 0, bound).toArray();
    }

    /** The row-list sum from a caller's {@code float[]} (a slice of one too) gives the bits of the scalar path. */
    @Test
    void rowListSumsFromAFloatArrayAreTheSameBits() {
        SplittableRandom random = new SplittableRandom(6);
        int rows = 40;
        int outRows = 9;
        try (Arena arena = Arena.ofConfined()) {
            for (int dimension : DIMENSIONS) {
                float[] values = new float[dimension * (rows + 1)];
                for (int j = 0; j < values.length; j++) {
                    values[j] = (float) random.nextDouble(-1, 1);
                }
                // Rows from the array's second row on: a slice, so the array path's base is not 0.
                MemorySegment in = MemorySegment.ofArray(values).asSlice(4L * dimension);
                int[] inRow = randomRows(random, rows, rows);
                int[] outRow = randomRows(random, rows, outRows);
                MemorySegment scalar = arena.allocate(4L * dimension * outRows, 64);
                MemorySegment dispatched = arena.allocate(4L * dimension * outRows, 64);
                ScalarKernels.addRows(scalar, outRow, in, inRow, 2, rows - 1, dimension);
                Kernels.addRows(dispatched, outRow, in, inRow, 2, rows - 1, dimension);
                assertArrayEquals(scalar.toArray(ValueLayout.JAVA_BYTE), dispatched.toArray(ValueLayout.JAVA_BYTE),
                        "dimension " + dimension);
                MemorySegment direct = arena.allocate(4L * dimension * outRows, 64);
                VectorKernels.addRowsFromArray(direct, outRow, values, dimension, inRow, 2, rows - 1, dimension);
                assertArrayEquals(scalar.toArray(ValueLayout.JAVA_BYTE), direct.toArray(ValueLayout.JAVA_BYTE),
                        "dimension " + dimension);
            }
        }
    }

    @Test
    void theFirstNonFiniteGradientIsFoundAnywhere() {
        float[] bad = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY};
        try (Arena arena = Arena.ofConfined()) {
            for (int n = 0; n <= 70; n++) {
                MemorySegment g = arena.allocate(4L * Math.max(1, n));
                for (int j = 0; j < n; j++) {
                    g.set(RowLayout.FLOAT, 4L * j, j % 2 == 0 ? Float.MAX_VALUE : -Float.MIN_VALUE);
                }
                assertEquals(-1, Kernels.firstNonFinite(g, 0, 4L * n));
                for (int at = 0; at < n; at++) {
                    float saved = g.get(RowLayout.FLOAT, 4L * at);
                    g.set(RowLayout.FLOAT, 4L * at, bad[at % 3]);
                    if (at + 1 < n) {
                        g.set(RowLayout.FLOAT, 4L * (n - 1), Float.NaN);
                    }
                    assertEquals(at, Kernels.firstNonFinite(g, 0, 4L * n), "n " + n + ", at " + at);
                    g.set(RowLayout.FLOAT, 4L * at, saved);
                    if (at + 1 < n) {
                        g.set(RowLayout.FLOAT, 4L * (n - 1), (n - 1) % 2 == 0 ? Float.MAX_VALUE : -Float.MIN_VALUE);
                    }
                }
            }
        }
    }

    @Test
    void heapSegmentsTakeTheScalarPathWithTheSameResult() {
        float[] heap = {1f, -2f, 3f};
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment nat = arena.allocate(12);
            MemorySegment.copy(heap, 0, nat, RowLayout.FLOAT, 0, 3);
            MemorySegment out = arena.allocate(12);
            Kernels.add(out, 0, MemorySegment.ofArray(heap), 0, 3);
            Kernels.add(out, 0, nat, 0, 3);
            assertEquals(-4f, out.get(RowLayout.FLOAT, 4));
            heap[1] = Float.NaN;
            assertEquals(1, Kernels.firstNonFinite(MemorySegment.ofArray(heap), 0, 12));
        }
    }
}
