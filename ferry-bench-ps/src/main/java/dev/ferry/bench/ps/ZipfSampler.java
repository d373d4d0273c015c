package dev.ferry.bench.ps;

import java.util.SplittableRandom;

/**
 * Zipf over {@code [1, n]} by rejection-inversion (Hörmann and Derflinger, 1996): constant
 * time per sample, no table, for any exponent above 0.
 */
public final class ZipfSampler {
    private final long n;
    private final double exponent;
    private final double hIntegralX1;
    private final double hIntegralN;
    private final double s;

    /** Ranks {@code [1, n]} with probability proportional to {@code rank^-exponent}. */
    public ZipfSampler(long n, double exponent) {
        if (n < 1 || !(exponent > 0)) {
            throw new IllegalArgumentException("need n >= 1 and exponent > 0: " + n + ", " + exponent);
        }
        this.n = n;
        this.exponent = exponent;
        this.hIntegralX1 = hIntegral(1.5) - 1.0;
        this.hIntegralN = hIntegral(n + 0.5);
        this.s = 2.0 - hIntegralInverse(hIntegral(2.5) - h(2));
    }

    /** A rank in {@code [1, n]}. */
    public long sample(SplittableRandom random) {
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
