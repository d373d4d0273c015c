package dev.ferry.bench.stream;

import java.lang.management.ManagementFactory;

import org.HdrHistogram.Histogram;

/**
 * What the sending side of a run measured, before the server's counters join it.
 *
 * @param messages timed messages
 * @param nanos from the first timed send to the last completion
 * @param latency per-message latencies in nanoseconds
 * @param counters the sender's counters over the timed part
 * @param allocBytesPerMessage bytes the sending thread allocated per timed message, or -1
 */
record Measured(long messages, long nanos, Histogram latency, SideCounters counters, double allocBytesPerMessage) {

    /** Latencies above this are recorded as this: a stall that long is a failure anyway. */
    static final long HIGHEST_NANOS = 60_000_000_000L;

    /** A histogram for latencies in nanoseconds, three significant digits. */
    static Histogram histogram() {
        return new Histogram(HIGHEST_NANOS, 3);
    }

    /** Records {@code nanos}, clamped into the histogram's range. */
    static void record(Histogram h, long nanos) {
        h.recordValue(Math.max(0, Math.min(HIGHEST_NANOS, nanos)));
    }

    /** Bytes the calling thread allocated so far, or -1 where the JVM does not say. */
    static long threadAllocatedBytes() {
        if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean bean
                && bean.isThreadAllocatedMemorySupported() && bean.isThreadAllocatedMemoryEnabled()) {
            return bean.getCurrentThreadAllocatedBytes();
        }
        return -1;
    }

    /** Bytes per message between two {@link #threadAllocatedBytes()} readings, or -1. */
    static double perMessage(long before, long after, long messages) {
        return before < 0 || after < 0 || messages <= 0 ? -1 : (double) (after - before) / messages;
    }
}
