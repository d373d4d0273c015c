package dev.ferry.rpc;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * Calls that one thread starts together and waits for together, woken once when the last of them
 * completes, however it completes (answer, failure, deadline, cancellation). For a batch spread
 * over several servers: waiting for each call's future in turn wakes the thread once per call
 * still out when it finished the one before, and {@code CompletableFuture.allOf} allocates a tree
 * of stages and a waiter per wait; a group allocates nothing and is kept for the next batch.
 *
 * <p>Owned by one thread: it starts calls with the group ({@link RpcChannel#call(RpcMethod, int,
 * RequestWriter, CallGroup)}), then {@linkplain #await awaits} them, then reads each call's
 * future, which is done unless the wait ran out. Any thread completes calls. The group only
 * saves wake-ups: a wait that returns early (a completion of an earlier batch's call arriving
 * late) leaves the futures to say what happened, so a group whose waits ran out or failed is
 * best replaced.
 */
public final class CallGroup {

    private final Thread owner;
    private final AtomicInteger outstanding = new AtomicInteger();
    /** Whether the owner waits (parked or about to park). */
    private volatile boolean waiting;
    /** The number of calls still out at which a waiting owner is woken; written by the owner before {@link #waiting}. */
    private volatile int wakeAt;

    /** A group owned by the calling thread. */
    public CallGroup() {
        this.owner = Thread.currentThread();
    }

    /** The thread that owns this group. */
    public Thread owner() {
        return owner;
    }

    /** Calls started with this group and not completed yet. */
    public int outstanding() {
        return outstanding.get();
    }

    /**
     * Waits until every call started with this group has completed, or {@code timeout} passes,
     * or the thread is interrupted (its interrupt status is kept). True if none is outstanding.
     *
     * @throws IllegalStateException on a thread other than the owner
     */
    public boolean await(long timeout, TimeUnit unit) {
        return awaitAtMost(0, timeout, unit);
    }

    /**
     * Waits until at most {@code left} calls started with this group are outstanding, or {@code
     * timeout} passes, or the thread is interrupted (its interrupt status is kept). True if at
     * most {@code left} are outstanding. A thread that can use the first answers while the others
     * are still out (a big batch's first parts scattered while the last is gathered) waits for
     * fewer than it started, uses those whose futures are done, and waits again.
     *
     * @throws IllegalArgumentException if {@code left} is negative
     * @throws IllegalStateException on a thread other than the owner
     */
    public boolean awaitAtMost(int left, long timeout, TimeUnit unit) {
        checkOwner();
        if (left < 0) {
            throw new IllegalArgumentException("left " + left + " < 0");
        }
        if (outstanding.get() <= left) {
            return true;
        }
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        wakeAt = left;
        waiting = true;
        try {
            while (outstanding.get() > left) {
                long wait = deadline - System.nanoTime();
                if (wait <= 0 || Thread.currentThread().isInterrupted()) {
                    return false;
                }
                LockSupport.parkNanos(this, wait);
            }
            return true;
        } finally {
            waiting = false;
        }
    }

    /**
     * A call joins the group; on the owner, as it starts the call.
     *
     * @throws IllegalStateException on a thread other than the owner (the call is not started)
     */
    void started() {
        checkOwner();
        outstanding.incrementAndGet();
    }

    /** A call of the group completed; on any thread, once per call. */
    void completed() {
        int left = outstanding.decrementAndGet();
        if (waiting && left <= wakeAt) {
            LockSupport.unpark(owner);
        }
    }

    private void checkOwner() {
        if (Thread.currentThread() != owner) {
            throw new IllegalStateException("call group of " + owner.getName() + " used on "
                    + Thread.currentThread().getName());
        }
    }
}
