package dev.ferry.ps;

import java.util.HashMap;
import java.util.Map;

/**
 * The optimizers written the plain way: double-precision state per id in arrays, one loop per
 * step. The server's results must match these to float tolerance.
 */
final class Reference {

    private final Optimizer optimizer;
    private final Initializer initializer;
    private final int dimension;
    private final Map<Long, Row> rows = new HashMap<>();

    static final class Row {
        final double[] w;
        final double[] s0;
        final double[] s1;
        long steps;

        Row(int dimension) {
            w = new double[dimension];
            s0 = new double[dimension];
            s1 = new double[dimension];
        }
    }

    Reference(Optimizer optimizer, Initializer initializer, int dimension) {
        this.optimizer = optimizer;
        this.initializer = initializer;
        this.dimension = dimension;
    }

    Row row(long id) {
        return rows.computeIfAbsent(id, k -> {
            Row r = new Row(dimension);
            for (int j = 0; j < dimension; j++) {
                r.w[j] = initializer.valueAt(k, j);
                if (optimizer instanceof Optimizer.Adagrad a) {
                    r.s0[j] = a.initialAccumulator();
                }
            }
            return r;
        });
    }

    /** One step on {@code id} with {@code g[from, from + dimension)}. */
    void step(long id, float[] g, int from) {
        Row r = row(id);
        r.steps++;
        for (int j = 0; j < dimension; j++) {
            double grad = g[from + j];
            switch (optimizer) {
                case Optimizer.Sgd o -> r.w[j] -= o.learningRate() * grad;
                case Optimizer.Adagrad o -> {
                    r.s0[j] += grad * grad;
                    r.w[j] -= o.learningRate() * grad / (Math.sqrt(r.s0[j]) + o.epsilon());
                }
                case Optimizer.Adam o -> {
                    r.s0[j] = o.beta1() * r.s0[j] + (1 - o.beta1()) * grad;
                    r.s1[j] = o.beta2() * r.s1[j] + (1 - o.beta2()) * grad * grad;
                    double mHat = r.s0[j] / (1 - Math.pow(o.beta1(), r.steps));
                    double vHat = r.s1[j] / (1 - Math.pow(o.beta2(), r.steps));
                    r.w[j] -= o.learningRate() * mHat / (Math.sqrt(vHat) + o.epsilon());
                }
                case Optimizer.Ftrl o -> {
                    double n = r.s1[j];
                    double sigma = (Math.sqrt(n + grad * grad) - Math.sqrt(n)) / o.alpha();
                    r.s0[j] += grad - sigma * r.w[j];
                    r.s1[j] = n + grad * grad;
                    double z = r.s0[j];
                    r.w[j] = Math.abs(z) <= o.l1() ? 0
                            : -(z - Math.signum(z) * o.l1()) / ((o.beta() + Math.sqrt(r.s1[j])) / o.alpha() + o.l2());
                }
            }
        }
    }

    Map<Long, Row> rows() {
        return rows;
    }
}
