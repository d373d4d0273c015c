package dev.ferry.rpc;

import java.util.Collection;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Call deadlines, swept on the client's timer thread instead of one scheduled task per call.
 *
 * <p>Every tick of the timer (5-50 ms) sweeps the pending calls of every channel and expires
 * those past their deadline. A call whose deadline comes before the next sweep arms a one-shot
 * sweep for it ({@link #watch}), so a deadline fires on time whatever the tick; in steady state
 * (deadlines of seconds, ticks of milliseconds) a call costs one volatile read here and nothing
 * is allocated or locked. Each sweep arms the next one-shot for the earliest deadline left if
 * that comes before the next tick.
 *
 * <p>A call registered while a sweep is already past it in the table, whose deadline also comes
 * before the next tick, is expired by the next tick: at most one tick late, only for deadlines
 * shorter than two ticks. Expiry itself is exactly once: the sweep removes the call from its
 * {@link PendingCalls} before completing it, as a reply would.
 */
final class CallTimeouts {

    private final ScheduledExecutorService timer;
    private final Collection<RpcChannel> channels;
    private final long tickNanos;
    private final Runnable sweepNow = () -> sweep(System.nanoTime(), false);
    /** A sweep starts by this time at the latest: the next tick, or an earlier one-shot. */
    private volatile long nextSweepNanos;
    // Guarded by this; written on the timer thread.
    private long nextTickNanos;

    CallTimeouts(ScheduledExecutorService timer, Collection<RpcChannel> channels, long tickNanos) {
        this.timer = timer;
        this.channels = channels;
        this.tickNanos = tickNanos;
        long now = System.nanoTime();
        this.nextTickNanos = now + tickNanos;
        this.nextSweepNanos = nextTickNanos;
    }

    /** A call with this deadline was just registered: makes sure a sweep comes by then. Any thread. */
    void watch(long deadlineNanos) {
        if (deadlineNanos - nextSweepNanos >= 0) {
            return;
        }
        arm(deadlineNanos);
    }

    private synchronized void arm(long atNanos) {
        if (atNanos - nextSweepNanos >= 0) {
            return;
        }
        nextSweepNanos = atNanos;
        try {
            timer.schedule(sweepNow, Math.max(0, atNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            // the client is closing: its close fails every pending call
        }
    }

    /** The periodic tick: sweeps, and counts the next tick from now. On the timer thread. */
    void tick(long nowNanos) {
        sweep(nowNanos, true);
    }

    private void sweep(long nowNanos, boolean tick) {
        long earliest = nowNanos + tickNanos;
        for (RpcChannel channel : channels) {
            long e = channel.expireDue(nowNanos, tickNanos);
            if (e - earliest < 0) {
                earliest = e;
            }
        }
        synchronized (this) {
            if (tick) {
                nextTickNanos = nowNanos + tickNanos;
            }
            // This sweep saw every call registered before it: the next must come by the earliest
            // deadline left or the next tick, whichever is first.
            nextSweepNanos = nextTickNanos;
            if (earliest - nextTickNanos < 0) {
                arm(earliest);
            }
        }
    }
}
