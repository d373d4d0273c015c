package dev.ferry.bench.ps;

/**
 * When a workload's warm-up may end: its calls per second, taken over equal slices, have
 * stopped changing. Cold JVMs (the client's and every server's) compile the workload's path for
 * many seconds, and a phase timed before that is over measures the compilers: the demo's fetch on
 * shm ran at a fifth of its settled rate or less through its first timed seconds after a fixed
 * 2 s warm-up. Settled means the last {@link #SLICES} rates are within {@link #TOLERANCE} of each
 * other (largest over smallest); a slice with no call is never settled. One thread.
 */
final class ThroughputSettle {

    /** Slices in a row that must agree. */
    static final int SLICES = 3;
    /** How far the largest of them may be above the smallest. */
    static final double TOLERANCE = 0.10;

    private final double[] rates = new double[SLICES];
    private int count;

    /**
     * Adds a slice's rate (calls per second) and says whether the workload has settled.
     *
     * @throws IllegalArgumentException if the rate is negative or not a number
     */
    boolean add(double rate) {
        if (!(rate >= 0) || Double.isInfinite(rate)) {
            throw new IllegalArgumentException("a rate of calls per second: " + rate);
        }
        rates[count++ % SLICES] = rate;
        if (count < SLICES) {
            return false;
        }
        double min = Double.MAX_VALUE;
        double max = 0;
        for (double r : rates) {
            min = Math.min(min, r);
            max = Math.max(max, r);
        }
        return min > 0 && max <= min * (1 + TOLERANCE);
    }
}
