package dev.ferry.bench.ps;

import java.util.SplittableRandom;

/**
 * Ids and batch sizes of a benchmark's requests. Ids are drawn from {@code [0, space)}: Zipf with
 * exponent {@code alpha} (id 0 the hottest; 1.09 is the skew of production embedding lookups the
 * issue asks for) or uniform when {@code alpha} is 0. Batch sizes are log-uniform in
 * {@code [minBatch, maxBatch]}, or fixed when the two are equal. One instance per thread.
 */
final class IdGenerator {

    /** Ids in the pool: 8 MiB per thread, 256 batches of the largest size. */
    static final int POOL = 1 << 20;

    private final SplittableRandom random;
    private final long space;
    private final Zipf zipf;
    /** Zipf ids drawn up front, so that sampling (two logarithms per id) is not measured as request cost. */
    private final long[] pool;
    private final int minBatch;
    private final int maxBatch;
    private final double logMin;
    private final double logSpan;

    IdGenerator(long seed, long space, double alpha, int minBatch, int maxBatch) {
        if (space < 1 || minBatch < 1 || maxBatch < minBatch) {
            throw new IllegalArgumentException("need space >= 1 and 1 <= minBatch <= maxBatch");
        }
        this.random = new SplittableRandom(seed);
        this.space = space;
        this.zipf = alpha > 0 ? new Zipf(space, alpha) : null;
        this.pool = zipf != null ? new long[POOL] : null;
        if (pool != null) {
            for (int i = 0; i < POOL; i++) {
                pool[i] = zipf.sample(random) - 1;
            }
        }
        this.minBatch = minBatch;
        this.maxBatch = maxBatch;
        this.logMin = Math.log(minBatch);
        this.logSpan = Math.log(maxBatch + 1.0) - logMin;
    }

    /** The size of the next batch. */
    int batchSize() {
        if (minBatch == maxBatch) {
            return minBatch;
        }
        int n = (int) Math.exp(logMin + random.nextDouble() * logSpan);
        return Math.max(minBatch, Math.min(maxBatch, n));
    }

    /** Fills {@code ids[0, count)}: a run of the Zipf pool from a random start, or uniform draws. */
    void fill(long[] ids, int count) {
        if (pool != null) {
            int at = random.nextInt(POOL);
            for (int i = 0; i < count; i++) {
                ids[i] = pool[(at + i) & (POOL - 1)];
            }
            return;
        }
        for (int i = 0; i < count; i++) {
            ids[i] = random.nextLong(space);
        }
    }

    SplittableRandom random() {
        return random;
    }

    /**
     * Zipf over {@code [1, n]} by rejection-inversion (Hörmann and Derflinger, 1996): constant
     * time per sample, no table, for any exponent above 0.
     */
    static final class Zipf {
        private final long n;
        private final double exponent;
        private final double hIntegralX1;
        private final double hIntegralN;
        private final double s;

        Zipf(long n, double exponent) {
            this.n = n;
            this.exponent = exponent;
            this.hIntegralX1 = hIntegral(1.5) - 1.0;
            this.hIntegralN = hIntegral(n + 0.5);
            this.s = 2.0 - hIntegralInverse(hIntegral(2.5) - h(2));
        }

        long sample(SplittableRandom random) {
            while (true) {
                double u = hIntegralN + random.nextDouble() * (hIntegralX1 - hIntegralN);
                double x = hIntegralInverse(u);
                long k = (long) (x + 0.5);
                if (k < 1) {
                    k = 1;
                } else if (k > n) {
                    k = n;
                }
                if (k - x <= s || u >= hIntegral(k + 0.5) - h(k)) {
                    return k;
                }
            }
        }

        private double h(double x) {
            return Math.exp(-exponent * Math.log(x));
        }

        private double hIntegral(double x) {
            double logX = Math.log(x);
            return helper2((1.0 - exponent) * logX) * logX;
        }

        private double hIntegralInverse(double x) {
            double t = x * (1.0 - exponent);
            if (t < -1.0) {
                t = -1.0;
            }
            return Math.exp(helper1(t) * x);
        }

        /** log(1 + x) / x, accurate near 0. */
        private static double helper1(double x) {
            return Math.abs(x) > 1e-8 ? Math.log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
        }

        /** (exp(x) - 1) / x, accurate near 0. */
        private static double helper2(double x) {
            return Math.abs(x) > 1e-8 ? Math.expm1(x) / x : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
        }
    }
}
