package dev.ferry.ps;

/**
 * The update rule a table applies on the server to each pushed gradient, with its
 * hyper-parameters. The state it needs per weight lives in the row beside the weights
 * ({@link #stateSlots()} floats per weight). Arithmetic is done in double and stored in f32.
 */
public sealed interface Optimizer permits Optimizer.Sgd, Optimizer.Adagrad, Optimizer.Adam, Optimizer.Ftrl {

    /** Floats of optimizer state per weight. */
    int stateSlots();

    /** Plain SGD with learning rate {@code learningRate}. */
    static Optimizer sgd(double learningRate) {
        return new Sgd(learningRate);
    }

    /** Adagrad with the usual defaults: initial accumulator 0.1, epsilon 1e-10. */
    static Optimizer adagrad(double learningRate) {
        return new Adagrad(learningRate, 0.1, 1e-10);
    }

    /** Adam with the usual defaults: beta1 0.9, beta2 0.999, epsilon 1e-8. */
    static Optimizer adam(double learningRate) {
        return new Adam(learningRate, 0.9, 0.999, 1e-8);
    }

    /** FTRL-Proximal with the usual defaults: beta 1, no regularisation. */
    static Optimizer ftrl(double alpha) {
        return new Ftrl(alpha, 1.0, 0.0, 0.0);
    }

    /**
     * {@code w -= learningRate * g}.
     *
     * @param learningRate step size, finite and positive
     */
    record Sgd(double learningRate) implements Optimizer {
        /** Checks the hyper-parameters. */
        public Sgd {
            positive("learningRate", learningRate);
        }

        @Override
        public int stateSlots() {
            return 0;
        }
    }

    /**
     * Adagrad: {@code a += g*g; w -= learningRate * g / (sqrt(a) + epsilon)}.
     *
     * @param learningRate       step size, finite and positive
     * @param initialAccumulator the accumulator of a new row, finite and at least 0
     * @param epsilon            added to the denominator, finite and at least 0
     */
    record Adagrad(double learningRate, double initialAccumulator, double epsilon) implements Optimizer {
        /** Checks the hyper-parameters. */
        public Adagrad {
            positive("learningRate", learningRate);
            nonNegative("initialAccumulator", initialAccumulator);
            nonNegative("epsilon", epsilon);
        }

        @Override
        public int stateSlots() {
            return 1;
        }
    }

    /**
     * Adam with bias correction: {@code m = b1 m + (1-b1) g; v = b2 v + (1-b2) g*g;
     * w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + epsilon)}, where {@code t} counts the
     * steps applied to this row (a sparse row that is not pushed does not age; "lazy" Adam).
     *
     * @param learningRate step size, finite and positive
     * @param beta1        decay of the first moment, in [0, 1)
     * @param beta2        decay of the second moment, in [0, 1)
     * @param epsilon      added to the denominator, finite and positive
     */
    record Adam(double learningRate, double beta1, double beta2, double epsilon) implements Optimizer {
        /** Checks the hyper-parameters. */
        public Adam {
            positive("learningRate", learningRate);
            unit("beta1", beta1);
            unit("beta2", beta2);
            positive("epsilon", epsilon);
        }

        @Override
        public int stateSlots() {
            return 2;
        }
    }

    /**
     * FTRL-Proximal (McMahan et al., 2013), per coordinate:
     * {@code sigma = (sqrt(n + g*g) - sqrt(n)) / alpha; z += g - sigma w; n += g*g;
     * w = |z| <= l1 ? 0 : -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2)}.
     *
     * @param alpha learning rate, finite and positive
     * @param beta  smoothing of the per-coordinate rate, finite and at least 0
     * @param l1    L1 regularisation, finite and at least 0
     * @param l2    L2 regularisation, finite and at least 0
     */
    record Ftrl(double alpha, double beta, double l1, double l2) implements Optimizer {
        /** Checks the hyper-parameters. */
        public Ftrl {
            positive("alpha", alpha);
            nonNegative("beta", beta);
            nonNegative("l1", l1);
            nonNegative("l2", l2);
        }

        @Override
        public int stateSlots() {
            return 2;
        }
    }

    private static void positive(String name, double value) {
        if (!(value > 0) || !Double.isFinite(value)) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, name + " must be finite and > 0: " + value);
        }
    }

    private static void nonNegative(String name, double value) {
        if (!(value >= 0) || !Double.isFinite(value)) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, name + " must be finite and >= 0: " + value);
        }
    }

    private static void unit(String name, double value) {
        if (!(value >= 0 && value < 1)) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, name + " must be in [0, 1): " + value);
        }
    }
}
