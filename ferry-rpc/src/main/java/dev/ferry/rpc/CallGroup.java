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
        checkOwner();
        if (outstanding.get() <= 0) {
            return true;
        }
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        waiting = true;
        try {
            while (outstanding.get() > 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0 || Thread.currentThread().isInterrupted()) {
                    return false;
                }
                LockSupport.parkNanos(this, left);
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
        if (outstanding.decrementAndGet() == 0 && waiting) {
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
