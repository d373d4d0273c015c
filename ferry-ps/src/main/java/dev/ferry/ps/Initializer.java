package dev.ferry.ps;

/**
 * The values a row gets when it is created by its first pull or push. Random initialisers are
 * counter-based: element {@code j} of row {@code id} is a pure function of
 * {@code (seed, id, j)}, so an id starts with the same values on whichever server or shard
 * creates it, and after any resharding.
 */
public sealed interface Initializer permits Initializer.Zeros, Initializer.Uniform, Initializer.Normal {

    /** Element {@code index} of the initial row of {@code id}. */
    float valueAt(long id, long index);

    /** All zeros. */
    static Initializer zeros() {
        return new Zeros();
    }

    /** Uniform in {@code [low, high)}. */
    static Initializer uniform(double low, double high, long seed) {
        return new Uniform(low, high, seed);
    }

    /** Normal with mean {@code mean} and standard deviation {@code stddev}. */
    static Initializer normal(double mean, double stddev, long seed) {
        return new Normal(mean, stddev, seed);
    }

    /** All zeros. */
    record Zeros() implements Initializer {
        @Override
        public float valueAt(long id, long index) {
            return 0f;
        }
    }

    /**
     * Uniform in {@code [low, high)}.
     *
     * @param low  lower bound, finite
     * @param high upper bound, finite and above {@code low}
     * @param seed the stream; the same seed gives the same rows
     */
    record Uniform(double low, double high, long seed) implements Initializer {
        /** Checks the bounds. */
        public Uniform {
            if (!Double.isFinite(low) || !Double.isFinite(high) || !(high > low)) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT,
                        "uniform bounds must be finite with low < high: [" + low + ", " + high + ")");
            }
        }

        @Override
        public float valueAt(long id, long index) {
            return (float) (low + (high - low) * unit(seed, id, index));
        }
    }

    /**
     * Normal (Box-Muller on two counter-based uniforms per pair of elements).
     *
     * @param mean   mean, finite
     * @param stddev standard deviation, finite and at least 0
     * @param seed   the stream; the same seed gives the same rows
     */
    record Normal(double mean, double stddev, long seed) implements Initializer {
        /** Checks the parameters. */
        public Normal {
            if (!Double.isFinite(mean) || !Double.isFinite(stddev) || stddev < 0) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT,
                        "normal needs a finite mean and a finite stddev >= 0: " + mean + ", " + stddev);
            }
        }

        @Override
        public float valueAt(long id, long index) {
            long pair = index >>> 1;
            double u1 = unit(seed, id, 2 * pair);
            double u2 = unit(seed, id, 2 * pair + 1);
            double radius = Math.sqrt(-2.0 * Math.log1p(-u1));
            double angle = 2.0 * Math.PI * u2;
            double z = (index & 1) == 0 ? radius * Math.cos(angle) : radius * Math.sin(angle);
            return (float) (mean + stddev * z);
        }
    }

    /** A double in [0, 1) determined by (seed, id, index) alone. */
    private static double unit(long seed, long id, long index) {
        long row = Slots.mix(Slots.mix(id) ^ seed);
        return (Slots.mix(row ^ Slots.mix(index)) >>> 11) * 0x1.0p-53;
    }
}
