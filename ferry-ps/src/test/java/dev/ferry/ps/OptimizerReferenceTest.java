package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OptimizerReferenceTest {

    static Stream<Optimizer> optimizers() {
        return Stream.of(
                Optimizer.sgd(0.05),
                new Optimizer.Adagrad(0.1, 0.1, 1e-10),
                new Optimizer.Adam(0.01, 0.9, 0.999, 1e-8),
                new Optimizer.Ftrl(0.1, 1.0, 0.01, 0.1));
    }

    /** Dimension 8 is shorter than a vector (scalar kernels only); 37 is two 16-lane vectors and a tail. */
    static Stream<Arguments> optimizersAndDimensions() {
        return optimizers().flatMap(o -> Stream.of(Arguments.of(o, 8), Arguments.of(o, 37)));
    }

    /**
     * 1,000 pushes of random batches (with duplicate ids, applied one step each in batch order)
     * against the double-precision reference. The kernels compute in f32; the tolerance is 1e-4
     * relative (to max(1, |expected|)) for weights, and 1e-4 * max(1, steps / 500) for the first
     * state slot, which sums f32-rounded terms.
     */
    @ParameterizedTest
    @MethodSource("optimizersAndDimensions")
    void sparseTableMatchesTheReference(Optimizer optimizer, int dimension) {
        int steps = TestScale.pick(1_000, 10_000);
        Initializer init = Initializer.normal(0, 0.1, 42);
        Reference reference = new Reference(optimizer, init, dimension);
        SplittableRandom random = new SplittableRandom(7);
        long[] pool = random.longs(64).toArray();
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults());
                Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("t", dimension, optimizer).withInitializer(init)
                    .withShards(4));
            int batch = 32;
            long[] ids = new long[batch];
            float[] gradients = new float[batch * dimension];
            MemorySegment request = arena.allocate((long) batch * dimension * Float.BYTES);
            for (int step = 0; step < steps; step++) {
                for (int i = 0; i < batch; i++) {
                    ids[i] = pool[random.nextInt(pool.length)];
                }
                for (int i = 0; i < gradients.length; i++) {
                    gradients[i] = (float) (random.nextDouble(-1, 1) * (1 + step % 3));
                }
                MemorySegment.copy(gradients, 0, request, RowLayout.FLOAT, 0, gradients.length);
                table.apply(ids, 0, batch, request);
                for (int i = 0; i < batch; i++) {
                    reference.step(ids[i], gradients, i * dimension);
                }
            }
            MemorySegment out = arena.allocate((long) pool.length * dimension * Float.BYTES);
            table.gather(pool, 0, pool.length, out);
            double worst = 0;
            for (int i = 0; i < pool.length; i++) {
                Reference.Row expected = reference.row(pool[i]);
                byte[] raw = table.rawRow(pool[i]);
                MemorySegment row = MemorySegment.ofArray(raw);
                assertEquals(expected.steps, row.get(RowLayout.LONG, RowLayout.STEPS_OFFSET));
                for (int j = 0; j < dimension; j++) {
                    float actual = out.get(RowLayout.FLOAT, ((long) i * dimension + j) * Float.BYTES);
                    assertEquals(actual, row.get(RowLayout.FLOAT, RowLayout.weight(j)), "gather = stored row");
                    double error = Math.abs(actual - expected.w[j]) / Math.max(1, Math.abs(expected.w[j]));
                    worst = Math.max(worst, error);
                    assertTrue(error < 1e-4, optimizer + " id " + pool[i] + " weight " + j + ": " + actual
                            + " vs reference " + expected.w[j]);
                    if (optimizer.stateSlots() > 0) {
                        // Accumulators (Adagrad's sum, FTRL's z) are sums of f32-rounded terms: their
                        // error grows with the steps a row took (about 500 per row at ci scale).
                        double tolerance = 1e-4 * Math.max(1, expected.steps / 500.0);
                        float state = row.get(RowLayout.FLOAT, RowLayout.state(dimension, 0, j));
                        assertTrue(Math.abs(state - expected.s0[j]) <= tolerance * Math.max(1, Math.abs(expected.s0[j])),
                                "state " + state + " vs " + expected.s0[j]);
                    }
                }
            }
            System.out.printf("%s, dimension %d (%s): %d steps, worst relative error %.2e%n", optimizer, dimension,
                    Kernels.describe(), steps, worst);
        }
    }

    @ParameterizedTest
    @MethodSource("optimizers")
    void denseTensorMatchesTheReference(Optimizer optimizer) {
        int length = 100;
        Initializer init = Initializer.uniform(-0.5, 0.5, 3);
        Reference reference = new Reference(optimizer, init, length);
        SplittableRandom random = new SplittableRandom(11);
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults());
                Arena arena = Arena.ofConfined()) {
            DenseTensor tensor = server.createDense(new DenseConfig("dense", length, optimizer, init));
            float[] gradients = new float[length];
            MemorySegment request = arena.allocate((long) length * Float.BYTES);
            for (int step = 0; step < 1_000; step++) {
                for (int i = 0; i < length; i++) {
                    gradients[i] = (float) random.nextDouble(-1, 1);
                }
                MemorySegment.copy(gradients, 0, request, RowLayout.FLOAT, 0, length);
                tensor.apply(request);
                reference.step(0, gradients, 0);
            }
            assertEquals(1_000, tensor.steps());
            MemorySegment out = arena.allocate(40L * Float.BYTES);
            tensor.read(30, 40, out);
            for (int j = 0; j < 40; j++) {
                double expected = reference.row(0).w[30 + j];
                float actual = out.get(RowLayout.FLOAT, 4L * j);
                assertTrue(Math.abs(actual - expected) <= 1e-4 * Math.max(1, Math.abs(expected)),
                        optimizer + " element " + (30 + j) + ": " + actual + " vs " + expected);
            }
        }
    }

    @Test
    void ftrlWithStrongL1KeepsWeightsAtZero() {
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults());
                Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("f", 4, new Optimizer.Ftrl(0.1, 1, 100, 0)));
            MemorySegment g = arena.allocate(16);
            for (int j = 0; j < 4; j++) {
                g.set(RowLayout.FLOAT, 4L * j, 0.5f);
            }
            for (int i = 0; i < 10; i++) {
                table.apply(new long[] {9}, 0, 1, g);
            }
            MemorySegment out = arena.allocate(16);
            table.gather(new long[] {9}, 0, 1, out);
            for (int j = 0; j < 4; j++) {
                assertEquals(0f, out.get(RowLayout.FLOAT, 4L * j));
            }
        }
    }
}
