package dev.ferry.transport.fabric;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The right to call libfabric and to touch what the progress loop owns (the operation table,
 * the links' queues and credits, the send window's progress-side accounting, rendezvous,
 * quarantine). libfabric wants one caller at a time per domain ({@code FI_THREAD_DOMAIN}); this
 * token is that one caller. The progress thread holds it while it works and lends it while it
 * spins, yields or sleeps; an application thread that gets it with {@link #tryAcquire} may post
 * its own send and poll the completion queue, then gives it back. A thread that cannot get it
 * hands its work over through the {@link ProgressProxy} as before.
 *
 * <p>Not reentrant: a holder never asks again. Under {@code -ea} every acquire checks that no
 * other thread is inside, and every release that the releasing thread was; a second holder is an
 * {@link AssertionError} naming both threads. The acquire is a compare-and-set (a full fence)
 * and the release a volatile write, so whatever one holder wrote the next one sees.
 */
final class FabricToken {

    private static final VarHandle INSIDE;

    private static final VarHandle ACQUISITIONS;

    static {
        try {
            INSIDE = MethodHandles.lookup().findVarHandle(FabricToken.class, "inside", Thread.class);
            ACQUISITIONS = MethodHandles.lookup().findVarHandle(FabricToken.class, "acquisitions", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final AtomicReference<Thread> holder = new AtomicReference<>();
    /** The thread inside, as seen by the assertions alone: set on entry, cleared on exit. */
    @SuppressWarnings("unused") // through INSIDE
    private volatile Thread inside;
    /**
     * Acquisitions so far: written by the holder alone (opaque, no fence), read by {@link
     * KilledSenderLock} to tell a holder stuck inside libfabric from one that comes and goes.
     */
    @SuppressWarnings("unused") // through ACQUISITIONS
    private long acquisitions;
    /** Test hook: acquires no longer exclude each other, so that the assertions can be seen to fire. */
    private volatile boolean exclusionOff;

    /** Takes the token if no thread holds it; true if the caller holds it now. */
    boolean tryAcquire() {
        Thread me = Thread.currentThread();
        if (exclusionOff || holder.get() == null && holder.compareAndSet(null, me)) {
            assert enter(me);
            ACQUISITIONS.setOpaque(this, (long) ACQUISITIONS.getOpaque(this) + 1);
            return true;
        }
        return false;
    }

    /**
     * Takes the token, waiting while another thread holds it: the progress thread, which others
     * lend it to for a few microseconds at a time.
     */
    void acquire() {
        for (int spins = 0; !tryAcquire(); spins++) {
            if (spins < 128) {
                Thread.onSpinWait();
            } else {
                Thread.yield(); // the holder may have been descheduled: let it run
            }
        }
    }

    /** Gives the token back: its holder only. */
    void release() {
        assert leave(Thread.currentThread());
        if (!exclusionOff) {
            holder.set(null);
        }
    }

    /** Whether the calling thread holds the token. */
    boolean heldByCurrentThread() {
        return holder.get() == Thread.currentThread();
    }

    /** The thread holding the token, or null; for diagnostics. */
    Thread holder() {
        return holder.get();
    }

    /** How many times the token was taken; a racy sample, for watching whether its holder moves on. */
    long acquisitions() {
        return (long) ACQUISITIONS.getOpaque(this);
    }

    /** Test hook: stops the token from excluding, so that a second holder trips the assertion. */
    void breakExclusionForTest() {
        exclusionOff = true;
    }

    private boolean enter(Thread me) {
        Thread other = (Thread) INSIDE.compareAndExchange(this, (Thread) null, me);
        if (other != null) {
            throw new AssertionError("the fabric token is held by " + other.getName() + " and " + me.getName());
        }
        return true;
    }

    private boolean leave(Thread me) {
        Thread was = (Thread) INSIDE.compareAndExchange(this, me, (Thread) null);
        if (was != me) {
            throw new AssertionError("the fabric token is released by " + me.getName() + " but held by "
                    + (was == null ? "no thread" : was.getName()));
        }
        return true;
    }
}
