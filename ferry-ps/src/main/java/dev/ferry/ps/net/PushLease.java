package dev.ferry.ps.net;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import dev.ferry.ps.BatchPlan;

/**
 * One push's hold on its plan. The request writers of the push's parts read the plan, and a
 * resend may call a writer again after the push has completed (a call times out while its
 * resend waits for a send buffer, and a retry succeeds; a late reply completes a call whose
 * resend is being encoded on a new session). So the plan goes back to its {@link PlanPool} only
 * once the push has succeeded and no writer is inside it, and a writer that comes after the push
 * ended writes nothing: {@link #enter} refuses it and it throws {@link #LATE}, which drops that
 * resend (its call is already complete). A push that failed drops its plan. Thread-safe.
 */
final class PushLease {

    /** Thrown by a request writer that came after its push ended: the stale resend is not sent. */
    static final RuntimeException LATE = new LateWriter();

    private static final int ENDED = 1 << 30;
    private static final int DROPPED = 1 << 29;
    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(PushLease.class, "state", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final BatchPlan plan;
    private final PlanPool pool;
    /** Writers inside the plan (low bits), {@link #ENDED} and {@link #DROPPED}. */
    @SuppressWarnings("unused") // through STATE
    private volatile int state;

    PushLease(BatchPlan plan, PlanPool pool) {
        this.plan = plan;
        this.pool = pool;
    }

    /** A writer is about to read the plan; false if the push has ended (write nothing, throw {@link #LATE}). */
    boolean enter() {
        for (;;) {
            int s = state;
            if ((s & ENDED) != 0) {
                return false;
            }
            if (STATE.compareAndSet(this, s, s + 1)) {
                return true;
            }
        }
    }

    /** A writer that {@linkplain #enter entered} is done with the plan. */
    void exit() {
        int s = (int) STATE.getAndAdd(this, -1) - 1;
        if (s == ENDED) { // the push succeeded while this writer was inside: the last one out gives it back
            pool.give(plan);
        }
    }

    /** The push ended, every part complete: its plan goes back now or at the last writer's exit, unless it failed. */
    void end(boolean succeeded) {
        int flags = succeeded ? ENDED : ENDED | DROPPED;
        int before = (int) STATE.getAndBitwiseOr(this, flags);
        if (before == 0 && succeeded) { // no writer inside
            pool.give(plan);
        }
    }

    /** Writers inside the plan now; for tests. */
    int writers() {
        return state & (DROPPED - 1);
    }

    private static final class LateWriter extends RuntimeException {
        private static final long serialVersionUID = 1L;

        LateWriter() {
            super("the push this request belonged to has ended; a late resend is not sent", null, false, false);
        }
    }
}
