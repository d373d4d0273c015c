package dev.ferry.transport.fabric;

import java.util.concurrent.locks.LockSupport;

/**
 * The progress thread's sleep while an application thread polls for its reply ({@link
 * CallerProgress}): such a caller does all the progress but the timers, so the progress thread
 * sleeps a slice without its wait object (peers posting to this side then find nobody to wake)
 * and lends the fabric token meanwhile. A hand-over, a caller that gives up its wait, or a send
 * whose completion is awaited ends the nap early.
 *
 * <p>The slices double from {@link #FIRST_NANOS} up to {@link #MAX_NANOS} while callers keep
 * polling: a nap that follows the last one within {@link #MAX_NANOS} continues the series (the
 * caller's gap between two calls, when the progress thread may spin or sleep a short slice,
 * does not end it). Each nap's end is a wake-up that must wait for a core which the caller and
 * its peer's progress thread are spinning on: at 50 us that was 20,000 a second, and a 64 B RPC
 * over shm averaged 2.7-4.1 us (p99 33-107 us) against 2.4-2.9 (24-32) with the series. What
 * arrives after the last caller stopped polling and before the nap ends (a request to this side,
 * a reply nobody polls for) waits that long at most.
 *
 * <p>{@link #take} runs on the progress thread only; the wakes on any thread.
 */
final class PollingNap {

    /** The first nap of a series. */
    static final long FIRST_NANOS = 50_000L;
    /** The longest nap. */
    static final long MAX_NANOS = 1_000_000L;

    private final ProgressLoop loop;
    /** The current nap's length, 0 between naps; one longer than {@link #FIRST_NANOS} a caller's awaited send ends. */
    private volatile long current;
    /** The next nap's length, if it follows the last one within {@link #MAX_NANOS}. */
    private long nextNanos = FIRST_NANOS;
    /** When the last nap ended. */
    private long lastEnd;
    /** Naps taken, and the longest asked for; for tests and diagnostics. */
    private volatile long naps;
    private volatile long longest;

    PollingNap(ProgressLoop loop) {
        this.loop = loop;
    }

    /** Sleeps one slice with the token lent, unless work was handed over: progress thread, {@code now} read last. */
    void take(long now, ProgressProxy proxy) {
        assert loop.inProgressThread();
        long slice = now - lastEnd <= MAX_NANOS ? nextNanos : FIRST_NANOS;
        nextNanos = Math.min(MAX_NANOS, slice << 1);
        naps++; // progress thread only
        if (slice > longest) {
            longest = slice;
        }
        current = slice;
        loop.lend();
        try {
            if (proxy.isEmpty()) {
                LockSupport.parkNanos(slice);
            }
        } finally {
            current = 0;
            loop.takeBack();
            lastEnd = System.nanoTime();
        }
    }

    /** Ends the nap, if one is on: something was handed over, or a caller gave up its wait. */
    void wake() {
        if (current != 0) {
            LockSupport.unpark(loop.thread());
        }
    }

    /** Ends a long nap (a short one ends soon enough): a caller posted a send whose completion is awaited. */
    void wakeIfLong() {
        if (current > FIRST_NANOS) {
            LockSupport.unpark(loop.thread());
        }
    }

    /** Naps taken, and the longest asked for in nanoseconds; for tests. */
    long[] counts() {
        return new long[] {naps, longest};
    }
}
