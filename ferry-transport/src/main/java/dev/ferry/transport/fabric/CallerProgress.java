package dev.ferry.transport.fabric;

import java.util.ArrayDeque;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.fabric.CompletionBatch;

/**
 * What an application thread does when it gets the {@link FabricToken}: it posts its own send
 * instead of handing it to the progress thread, and while it waits for a reply it polls the
 * completion queue itself, so that a request and its reply cross no thread at all on this side.
 *
 * <p>Everything it touches belongs to the token's holder, exactly as on the progress thread:
 * the proxy's queue (drained first, and a send is posted here only if nothing is left in it, so
 * that this thread's own earlier hand-overs keep their order on their link), the links' queues, credits and send window, the operation table, and one
 * {@link CompletionBatch} shared by all holders but the progress thread. A thread that cannot
 * get the token hands over as before ({@link ProgressProxy}).
 *
 * <p>While some thread polls for a reply ({@link #polling}), the progress thread does not spin
 * but sleeps in short slices: a third thread spinning on two cores would cost more than it
 * saves. {@code -Dferry.transport.directPost=false} switches all of this off (for comparisons).
 */
final class CallerProgress {

    private static final int BATCH = 16;
    /** A polling caller reads the clock once per this many turns ({@link #await}). */
    private static final int CLOCK_TURNS = 8;

    private final FabricTransport transport;
    private final ProgressLoop loop;
    private final FabricToken token;
    private final boolean enabled = !"false".equals(System.getProperty("ferry.transport.directPost"));
    /** Read by holders other than the progress thread; guarded by the token, closed at shutdown. */
    private final CompletionBatch batch = new CompletionBatch(BATCH);
    private final AtomicInteger polling = new AtomicInteger();
    /** Sends to hand over once the token goes back ({@link #mustDefer}); guarded by the token, empty between holders. */
    private final ArrayDeque<OutboundFrame> deferred = new ArrayDeque<>();
    /** Sends posted by the thread that made them; for tests and diagnostics. */
    final LongAdder directPosts = new LongAdder();
    /** Completion-queue polls made by waiting callers; for tests and diagnostics. */
    final LongAdder callerPolls = new LongAdder();

    CallerProgress(FabricTransport transport, ProgressLoop loop) {
        this.transport = transport;
        this.loop = loop;
        this.token = loop.token();
    }

    /**
     * Posts {@code frame} on the calling thread if the token is free; false (the caller hands it
     * over) if not, or if the transport is closing.
     */
    boolean post(OutboundFrame frame) {
        if (!enabled || !token.tryAcquire()) {
            return false;
        }
        boolean reapSoon = false;
        try {
            if (transport.isClosed()) {
                return false;
            }
            boolean awaited = frame.future != null; // read before the frame may complete and go back
            if (drainedAll()) {
                transport.sends.enqueue(frame);
                transport.sends.pump();
                reapSoon = awaited || transport.sends.blocked();
                directPosts.increment();
            } else {
                deferred.add(frame); // behind what this thread may have left in the queue
            }
        } finally {
            giveBack(); // also when the work above threw: nothing deferred is lost
        }
        // The progress thread may sleep long, and its own completions do not wake it: woken if
        // a thread waits for this send or a link waits for room (else the completion is reaped
        // on its next turn of work, and this send costs it no wake-up).
        if (reapSoon) {
            loop.wakeForCompletions();
        }
        return true;
    }

    /**
     * Whether a send that the token's holder, not being the progress thread, makes now must wait
     * behind the hand-over queue: application code it ran (a handler while it polled, a failed
     * send's callback or a teardown's {@code onPeerClosed} in its drain) sends while what this
     * thread handed over earlier may still be queued. Token holder.
     */
    boolean mustDefer() {
        return !deferred.isEmpty() || !transport.proxy.isEmpty();
    }

    /** Keeps {@code frame} to be handed over once the token is given back ({@link #mustDefer}). Token holder. */
    void defer(OutboundFrame frame) {
        deferred.add(frame);
    }

    /** The deferred sends, taken out before the token goes back; null if none. Token holder. */
    private OutboundFrame[] takeDeferred() {
        if (deferred.isEmpty()) {
            return null;
        }
        OutboundFrame[] frames = deferred.toArray(OutboundFrame[]::new);
        deferred.clear();
        return frames;
    }

    /** Hands deferred sends over as a thread without the token does, behind the queue; in order. */
    private void handOver(OutboundFrame[] frames) {
        if (frames != null) {
            for (OutboundFrame frame : frames) {
                transport.handOver(frame);
            }
        }
    }

    /**
     * Takes what other threads handed over; true if the queue is empty after it and nothing was
     * deferred, so that nothing this thread handed over earlier is left behind a send it posts itself. The drain stops after
     * a turn's worth of commands, and at a position another thread has claimed but not yet filled:
     * then what follows in the queue may be this thread's. Token holder.
     */
    private boolean drainedAll() {
        loop.drainCommands();
        return !mustDefer();
    }

    /** Gives the token back, then hands over what was deferred meanwhile, in order. Token holder. */
    private void giveBack() {
        OutboundFrame[] later = takeDeferred();
        token.release();
        handOver(later);
    }

    /**
     * Reposts the buffer of an eager message the application released on the calling thread if
     * the token is free (a handed-over release would wake a napping progress thread); false (the
     * caller hands it over) if not.
     */
    boolean release(InboundFrame message) {
        if (!enabled || !token.tryAcquire()) {
            return false;
        }
        boolean blocked;
        try {
            if (transport.isClosed()) {
                return false;
            }
            loop.drainCommands(); // this thread's earlier releases and sends go first
            transport.receives.repost(message);
            transport.sends.pump(); // a credit return may be due: posted here, not on the next turn
            blocked = transport.sends.blocked() || transport.receives.retrying();
        } finally {
            giveBack(); // also when the work above threw: nothing deferred is lost
        }
        if (blocked) {
            loop.wakeForCompletions(); // what could not be posted waits for the progress thread
        }
        return true;
    }

    /**
     * Waits up to {@code nanos} for {@code done}, polling the completion queue whenever the
     * token is free; true if it is done. Returns at once where the host has more runnable
     * threads than cores ({@link CpuPressure}): there, even 10 us of polling per call took the
     * core the server's thread needed (RPC p50 17 us against 7.4 us without, at load 12-14).
     * If it gives up, the progress thread is woken to take over the wait.
     */
    boolean await(Future<?> done, long nanos) {
        if (done.isDone()) {
            return true;
        }
        if (!enabled || nanos <= 0 || loop.overcommitted() || transport.isClosed()) {
            return false;
        }
        polling.incrementAndGet();
        // The clock is read every CLOCK_TURNS turns (a reading costs about a turn's poll): the
        // wait starts at the first reading, so it lasts up to CLOCK_TURNS turns beyond nanos.
        long start = 0;
        int turns = 0;
        try {
            do {
                if (token.tryAcquire()) {
                    try {
                        if (transport.isClosed()) {
                            return done.isDone();
                        }
                        callerPolls.increment();
                        if (drainedAll()) { // a handler run here sends behind this thread's hand-overs
                            loop.poll(batch);
                        }
                        transport.sends.pump();
                        transport.pulls.pull();
                    } finally {
                        giveBack();
                    }
                    if (done.isDone()) {
                        return true;
                    }
                }
                Thread.onSpinWait();
                if (++turns % CLOCK_TURNS == 0) {
                    long now = System.nanoTime();
                    if (start == 0) {
                        start = now;
                    } else if (now - start >= nanos) {
                        break;
                    }
                }
            } while (!done.isDone());
            return done.isDone();
        } finally {
            polling.decrementAndGet();
            if (!done.isDone()) {
                loop.wake(); // the progress thread takes the wait over
            }
        }
    }

    /**
     * Whether a caller polls for its reply now: the progress thread need not spin. (Between two
     * calls of one caller nobody polls; a progress thread that wakes from its nap just then
     * costs that caller's next send one wake-up, about one call in ten.)
     */
    boolean polling() {
        return polling.get() > 0;
    }

    /** Shutdown, by the progress thread, which keeps the token from now on. */
    void close() {
        assert token.heldByCurrentThread();
        batch.close();
    }
}
