package dev.ferry.ps;

import static dev.ferry.ps.RowLayout.FLOAT;
import static dev.ferry.ps.RowLayout.LONG;

import java.lang.foreign.MemorySegment;

/**
 * Creates rows and applies one optimizer step to a row in place ({@link RowLayout}): one pass
 * over the row's weights and state, in f32, vectorised where the JVM allows ({@link Kernels}).
 * The hyper-parameters are rounded to f32 once; what only depends on the row's step count
 * (Adam's bias correction) is computed once per row, in double. Callers hold the row's lock.
 *
 * <p>Against the double-precision reference, 1,000 pushes of random batches stay within 1e-4
 * relative ({@code OptimizerReferenceTest}).
 */
final class OptimizerKernel {

    /** Adam's corrections {@code beta^t} below this are taken as 0: f32 cannot tell them from it. */
    private static final double NEGLIGIBLE = 1e-10;
    /** Adam's per-row step sizes for the first steps of a row, precomputed (32 KiB at most). */
    private static final int ADAM_TABLE = 4096;
    /**
     * Past {@link #ADAM_TABLE}, {@code b2^t} is {@code b2^(128 (t >> 7)) * b2^(t & 127)}, from two
     * tables of powers: 128 low ones and up to {@value} high ones (t below 65,536; 5 KiB at most).
     */
    private static final int ADAM_POWERS_HIGH = 512;
    private static final int ADAM_POWERS_LOW_BITS = 7;

    private final Optimizer optimizer;
    private final Initializer initializer;
    private final int slots;
    private final float lr;
    private final float eps;
    private final float b1;
    private final float oneMinusB1;
    private final float b2;
    private final float oneMinusB2;
    private final double logB1;
    private final double logB2;
    private final long adamSaturated;
    /**
     * Adam's step count from which {@code b1^t < 2^-60}, so that {@code 1 - b1^t} is 1 exactly
     * in double (the step size is then computed without it, the same bits).
     */
    private final long adamB1Negligible;
    /** Adam's learning rate and epsilon in double, for the corrections past the table. */
    private final double learningRate;
    private final double epsilonD;
    /** Adam's step size and epsilon for step counts {@code [1, table.length / 2]}, interleaved. */
    private final float[] adamTable;
    /** {@code b2^(128 k)} and {@code b2^j}, {@code j < 128}: {@code b2^t} for {@code t < 128 adamPowersHigh.length}. */
    private final double[] adamPowersHigh;
    private final double[] adamPowersLow;
    private final float invAlpha;
    private final float beta;
    private final float l1;
    private final float l2;

    OptimizerKernel(Optimizer optimizer, Initializer initializer) {
        this.optimizer = optimizer;
        this.initializer = initializer;
        this.slots = optimizer.stateSlots();
        float rate = 0;
        float epsilon = 0;
        double beta1 = 0;
        double beta2 = 0;
        double alpha = 1;
        double ftrlBeta = 0;
        double ftrlL1 = 0;
        double ftrlL2 = 0;
        switch (optimizer) {
            case Optimizer.Sgd o -> rate = (float) o.learningRate();
            case Optimizer.Adagrad o -> {
                rate = (float) o.learningRate();
                epsilon = (float) o.epsilon();
            }
            case Optimizer.Adam o -> {
                rate = (float) o.learningRate();
                epsilon = (float) o.epsilon();
                beta1 = o.beta1();
                beta2 = o.beta2();
            }
            case Optimizer.Ftrl o -> {
                alpha = o.alpha();
                ftrlBeta = o.beta();
                ftrlL1 = o.l1();
                ftrlL2 = o.l2();
            }
        }
        this.lr = rate;
        this.eps = epsilon;
        this.b1 = (float) beta1;
        this.oneMinusB1 = (float) (1 - beta1);
        this.b2 = (float) beta2;
        this.oneMinusB2 = (float) (1 - beta2);
        this.logB1 = Math.log(beta1);
        this.logB2 = Math.log(beta2);
        this.adamSaturated = (long) Math.ceil(Math.max(saturation(beta1), saturation(beta2)));
        this.adamB1Negligible = beta1 <= 0 ? 0
                : (long) Math.min(Long.MAX_VALUE / 2.0, Math.ceil(-60 * Math.log(2) / logB1) + 1);
        this.learningRate = optimizer instanceof Optimizer.Adam o ? o.learningRate() : 0;
        this.epsilonD = optimizer instanceof Optimizer.Adam o ? o.epsilon() : 0;
        int tabled = optimizer instanceof Optimizer.Adam ? (int) Math.min(ADAM_TABLE, adamSaturated) : 0;
        this.adamTable = new float[2 * tabled];
        for (int t = 1; t <= tabled; t++) {
            adamTable[2 * t - 2] = adamScale(t);
            adamTable[2 * t - 1] = adamEpsilon(t);
        }
        boolean powers = optimizer instanceof Optimizer.Adam && adamSaturated > ADAM_TABLE;
        int high = powers ? (int) Math.min(ADAM_POWERS_HIGH, (adamSaturated >> ADAM_POWERS_LOW_BITS) + 1) : 0;
        this.adamPowersHigh = new double[high];
        this.adamPowersLow = new double[powers ? 1 << ADAM_POWERS_LOW_BITS : 0];
        for (int k = 0; k < high; k++) {
            adamPowersHigh[k] = Math.exp(((long) k << ADAM_POWERS_LOW_BITS) * logB2);
        }
        for (int j = 0; j < adamPowersLow.length; j++) {
            adamPowersLow[j] = Math.exp(j * logB2);
        }
        this.invAlpha = (float) (1 / alpha);
        this.beta = (float) ftrlBeta;
        this.l1 = (float) ftrlL1;
        this.l2 = (float) ftrlL2;
    }

    /** Adam's step size at step {@code t}: {@code lr sqrt(1 - b2^t) / (1 - b1^t)}. */
    private float adamScale(long t) {
        Optimizer.Adam o = (Optimizer.Adam) optimizer;
        return (float) (o.learningRate() * Math.sqrt(1 - Math.exp(t * logB2)) / (1 - Math.exp(t * logB1)));
    }

    /** Adam's epsilon at step {@code t}: {@code eps sqrt(1 - b2^t)}. */
    private float adamEpsilon(long t) {
        Optimizer.Adam o = (Optimizer.Adam) optimizer;
        return (float) (o.epsilon() * Math.sqrt(1 - Math.exp(t * logB2)));
    }

    /**
     * {@code b2^t} for Adam's step count {@code t} past its table: the product of two tabled
     * powers while {@code t < 65,536}, else {@code exp(t ln b2)}. The product and the exp differ by
     * a few units in the last place of a double, which the f32 step size and epsilon made from
     * them do not show ({@code KernelsTest} compares them for every step count to saturation).
     */
    double adamPowerB2(long t) {
        long k = t >>> ADAM_POWERS_LOW_BITS;
        if (k < adamPowersHigh.length) {
            return adamPowersHigh[(int) k] * adamPowersLow[(int) t & ((1 << ADAM_POWERS_LOW_BITS) - 1)];
        }
        return Math.exp(t * logB2);
    }

    /** The step count from which {@code beta^t} is negligible. */
    private static double saturation(double beta) {
        return beta <= 0 ? 0 : Math.min(Long.MAX_VALUE / 2.0, Math.log(NEGLIGIBLE) / Math.log(beta));
    }

    /** Writes a new row ({@link RowLayout}): header, initial weights, initial optimizer state (the segment is zeroed). */
    void initRow(MemorySegment s, long row, long id, long dimension) {
        initRow(s, row + RowLayout.WEIGHTS_OFFSET, row + RowLayout.ID_OFFSET, row + RowLayout.STEPS_OFFSET,
                row + RowLayout.state(dimension, 0, 0), id, dimension);
    }

    /**
     * Writes a new row of {@code s} whose weights start at {@code w} and whose id, step count and
     * state are at {@code idAt}, {@code stepsAt} and {@code stateAt} (zeroed).
     */
    void initRow(MemorySegment s, long w, long idAt, long stepsAt, long stateAt, long id, long dimension) {
        s.set(LONG, idAt, id);
        s.set(LONG, stepsAt, 0L);
        if (!(initializer instanceof Initializer.Zeros)) {
            for (long j = 0; j < dimension; j++) {
                s.set(FLOAT, w + (long) Float.BYTES * j, initializer.valueAt(id, j));
            }
        }
        if (optimizer instanceof Optimizer.Adagrad a && a.initialAccumulator() != 0) {
            float initial = (float) a.initialAccumulator();
            for (long j = 0; j < dimension; j++) {
                s.set(FLOAT, stateAt + (long) Float.BYTES * j, initial);
            }
        }
    }

    /** Writes the initial weights of {@code id} (a row that is not stored) to {@code out}. */
    void initWeights(long id, long dimension, MemorySegment out, long at) {
        for (long j = 0; j < dimension; j++) {
            out.set(FLOAT, at + (long) Float.BYTES * j, initializer.valueAt(id, j));
        }
    }

    /** One step on the row at {@code row} of {@code s} ({@link RowLayout}) with the gradient row at {@code g} of {@code grads}. */
    void step(MemorySegment s, long row, int dimension, MemorySegment grads, long g) {
        step(s, row + RowLayout.WEIGHTS_OFFSET, row + RowLayout.STEPS_OFFSET, row + RowLayout.state(dimension, 0, 0),
                dimension, grads, g);
    }

    /**
     * One step on the row of {@code s} whose weights start at {@code w} and whose step count and
     * state ({@link Optimizer#stateSlots()} runs of {@code dimension} floats) are at
     * {@code stepsAt} and {@code stateAt}.
     */
    void step(MemorySegment s, long w, long stepsAt, long stateAt, int dimension, MemorySegment grads, long g) {
        long steps = s.get(LONG, stepsAt) + 1;
        s.set(LONG, stepsAt, steps);
        long s0 = stateAt;
        long s1 = s0 + (long) Float.BYTES * dimension;
        switch (optimizer) {
            case Optimizer.Sgd o -> Kernels.sgd(s, w, grads, g, dimension, lr);
            case Optimizer.Adagrad o -> Kernels.adagrad(s, w, s0, grads, g, dimension, lr, eps);
            case Optimizer.Adam o -> {
                // lr * (m / c1) / (sqrt(v / c2) + eps) == (lr sqrt(c2) / c1) * m / (sqrt(v) + eps sqrt(c2)).
                float scale = lr;
                float epsHat = eps;
                if (steps <= adamTable.length / 2) {
                    scale = adamTable[(int) (2 * steps - 2)];
                    epsHat = adamTable[(int) (2 * steps - 1)];
                } else if (steps < adamSaturated) {
                    double rootC2 = Math.sqrt(1 - adamPowerB2(steps));
                    // 1 - b1^t is 1 exactly from adamB1Negligible on: no exp, no division.
                    scale = (float) (steps < adamB1Negligible ? learningRate * rootC2 / (1 - Math.exp(steps * logB1))
                            : learningRate * rootC2);
                    epsHat = (float) (epsilonD * rootC2);
                }
                Kernels.adam(s, w, s0, s1, grads, g, dimension, b1, oneMinusB1, b2, oneMinusB2, scale, epsHat);
            }
            case Optimizer.Ftrl o -> Kernels.ftrl(s, w, s0, s1, grads, g, dimension, invAlpha, beta, l1, l2);
        }
    }

    int stateSlots() {
        return slots;
    }
}
