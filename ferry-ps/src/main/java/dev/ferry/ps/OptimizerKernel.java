package dev.ferry.ps;

import static dev.ferry.ps.RowLayout.FLOAT;
import static dev.ferry.ps.RowLayout.LONG;

import java.lang.foreign.MemorySegment;

/**
 * Creates rows and applies one optimizer step to a row in place ({@link RowLayout}). Each
 * element is read from f32, updated in double and stored back in f32. Callers hold the row's
 * lock.
 */
final class OptimizerKernel {

    private final Optimizer optimizer;
    private final Initializer initializer;
    private final int slots;

    OptimizerKernel(Optimizer optimizer, Initializer initializer) {
        this.optimizer = optimizer;
        this.initializer = initializer;
        this.slots = optimizer.stateSlots();
    }

    /** Writes a new row: header, initial weights, initial optimizer state (the segment is zeroed). */
    void initRow(MemorySegment s, long row, long id, long dimension) {
        s.set(LONG, row + RowLayout.ID_OFFSET, id);
        s.set(LONG, row + RowLayout.STEPS_OFFSET, 0L);
        if (!(initializer instanceof Initializer.Zeros)) {
            for (long j = 0; j < dimension; j++) {
                s.set(FLOAT, row + RowLayout.weight(j), initializer.valueAt(id, j));
            }
        }
        if (optimizer instanceof Optimizer.Adagrad a && a.initialAccumulator() != 0) {
            float initial = (float) a.initialAccumulator();
            for (long j = 0; j < dimension; j++) {
                s.set(FLOAT, row + RowLayout.state(dimension, 0, j), initial);
            }
        }
    }

    /** Writes the initial weights of {@code id} (a row that is not stored) to {@code out}. */
    void initWeights(long id, long dimension, MemorySegment out, long at) {
        for (long j = 0; j < dimension; j++) {
            out.set(FLOAT, at + (long) Float.BYTES * j, initializer.valueAt(id, j));
        }
    }

    /** One step on the row at {@code row} of {@code s} with the gradient row at {@code g} of {@code grads}. */
    void step(MemorySegment s, long row, long dimension, MemorySegment grads, long g) {
        long steps = s.get(LONG, row + RowLayout.STEPS_OFFSET) + 1;
        s.set(LONG, row + RowLayout.STEPS_OFFSET, steps);
        switch (optimizer) {
            case Optimizer.Sgd sgd -> {
                double lr = sgd.learningRate();
                for (long j = 0; j < dimension; j++) {
                    long w = row + RowLayout.weight(j);
                    s.set(FLOAT, w, (float) (s.get(FLOAT, w) - lr * grads.get(FLOAT, g + 4 * j)));
                }
            }
            case Optimizer.Adagrad ada -> {
                double lr = ada.learningRate();
                double eps = ada.epsilon();
                for (long j = 0; j < dimension; j++) {
                    long w = row + RowLayout.weight(j);
                    long a = row + RowLayout.state(dimension, 0, j);
                    double grad = grads.get(FLOAT, g + 4 * j);
                    double acc = s.get(FLOAT, a) + grad * grad;
                    s.set(FLOAT, a, (float) acc);
                    s.set(FLOAT, w, (float) (s.get(FLOAT, w) - lr * grad / (Math.sqrt(acc) + eps)));
                }
            }
            case Optimizer.Adam adam -> {
                double lr = adam.learningRate();
                double b1 = adam.beta1();
                double b2 = adam.beta2();
                double eps = adam.epsilon();
                double correction1 = 1 - Math.pow(b1, steps);
                double correction2 = 1 - Math.pow(b2, steps);
                for (long j = 0; j < dimension; j++) {
                    long w = row + RowLayout.weight(j);
                    long mAt = row + RowLayout.state(dimension, 0, j);
                    long vAt = row + RowLayout.state(dimension, 1, j);
                    double grad = grads.get(FLOAT, g + 4 * j);
                    double m = b1 * s.get(FLOAT, mAt) + (1 - b1) * grad;
                    double v = b2 * s.get(FLOAT, vAt) + (1 - b2) * grad * grad;
                    s.set(FLOAT, mAt, (float) m);
                    s.set(FLOAT, vAt, (float) v);
                    s.set(FLOAT, w, (float) (s.get(FLOAT, w) - lr * (m / correction1) / (Math.sqrt(v / correction2) + eps)));
                }
            }
            case Optimizer.Ftrl ftrl -> {
                double alpha = ftrl.alpha();
                double beta = ftrl.beta();
                double l1 = ftrl.l1();
                double l2 = ftrl.l2();
                for (long j = 0; j < dimension; j++) {
                    long w = row + RowLayout.weight(j);
                    long zAt = row + RowLayout.state(dimension, 0, j);
                    long nAt = row + RowLayout.state(dimension, 1, j);
                    double grad = grads.get(FLOAT, g + 4 * j);
                    double n = s.get(FLOAT, nAt);
                    double nNext = n + grad * grad;
                    double sigma = (Math.sqrt(nNext) - Math.sqrt(n)) / alpha;
                    double z = s.get(FLOAT, zAt) + grad - sigma * s.get(FLOAT, w);
                    s.set(FLOAT, zAt, (float) z);
                    s.set(FLOAT, nAt, (float) nNext);
                    double weight = Math.abs(z) <= l1 ? 0.0
                            : -(z - Math.signum(z) * l1) / ((beta + Math.sqrt(nNext)) / alpha + l2);
                    s.set(FLOAT, w, (float) weight);
                }
            }
        }
    }

    int stateSlots() {
        return slots;
    }
}
