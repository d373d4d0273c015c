package dev.ferry.bench.ps;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * When a run's warm-up may end because its JIT compilers have settled: their CPU over the last
 * {@link #WINDOW_NANOS} is under {@code share} of the CPU of all the run's processes, or
 * {@link #LIMIT_NANOS} have passed. Seventeen JVMs on two cores take minutes to compile their
 * hot paths, so a fixed warm-up measures part of their start-up. Samples the counters at most
 * once a second. Owned by the driver's thread.
 */
final class JitSettle {

    /** The window the share is taken over. */
    static final long WINDOW_NANOS = TimeUnit.SECONDS.toNanos(5);
    /** The longest the warm-up waits for the compilers, from the first sample. */
    static final long LIMIT_NANOS = TimeUnit.SECONDS.toNanos(180);
    private static final long SAMPLE_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final double share;
    /** Samples {time, cpu, compilers} in nanoseconds, oldest first, spanning a window and at most one sample more. */
    private final ArrayDeque<long[]> samples = new ArrayDeque<>();
    private long first = Long.MIN_VALUE;
    private double lastShare = Double.NaN;
    private boolean settled;
    private boolean timedOut;

    /** @param share the compilers' share of the CPU under which they count as settled, in (0, 1) */
    JitSettle(double share) {
        this.share = checkShare(share);
    }

    /** {@code share} if it is a share of the CPU in (0, 1); else the option's error. */
    static double checkShare(double share) {
        if (!(share > 0 && share < 1)) {
            throw new IllegalArgumentException("--settle takes a share of the CPU in (0, 1): " + share);
        }
        return share;
    }

    /**
     * Whether the warm-up may end at {@code now}: takes a sample of {@code cpu} and {@code
     * compilers} (cumulative CPU nanoseconds of the run's processes and of their compiler threads)
     * if a second has passed since the last, and answers from the samples.
     */
    boolean settled(long now, LongSupplier cpu, LongSupplier compilers) {
        if (settled) {
            return true;
        }
        if (!samples.isEmpty() && now - samples.peekLast()[0] < SAMPLE_NANOS) {
            return false;
        }
        samples.addLast(new long[] {now, cpu.getAsLong(), compilers.getAsLong()});
        if (first == Long.MIN_VALUE) {
            first = now;
        }
        // Keep the newest sample at least a window old, and none older: the share spans a window
        // or a little more, however far apart the steps that take the samples fall.
        while (samples.size() > 2 && now - second()[0] >= WINDOW_NANOS) {
            samples.removeFirst();
        }
        long[] oldest = samples.peekFirst();
        long[] newest = samples.peekLast();
        if (newest[0] - oldest[0] >= WINDOW_NANOS) {
            long cpuDelta = newest[1] - oldest[1];
            lastShare = cpuDelta <= 0 ? 0 : (double) (newest[2] - oldest[2]) / cpuDelta;
            settled = lastShare < share;
        }
        if (!settled && now - first >= LIMIT_NANOS) {
            timedOut = true;
            settled = true;
        }
        return settled;
    }

    /** The second-oldest sample; there are at least two. */
    private long[] second() {
        var it = samples.iterator();
        it.next();
        return it.next();
    }

    /** The compilers' share of the CPU over the last full window, or NaN before the first. */
    double lastShare() {
        return lastShare;
    }

    /** Whether the warm-up ended at {@link #LIMIT_NANOS} with the compilers still above the share. */
    boolean timedOut() {
        return timedOut;
    }
}
