package dev.ferry.transport.fabric;

import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;

/**
 * Callers that wait for an answer sleep on this side's {@link Doorbell} themselves (shm), so that
 * the answer's ring wakes a thread that waits for answers instead of the progress thread, which
 * would then dispatch it and wake the caller: one thread woken per answer instead of two.
 *
 * <p>Each waiting caller has a wake bit (up to {@link #SLOTS} at once; the progress thread has
 * {@link Doorbell#PROGRESS}) and its future. A peer's ring wakes the caller that has slept longest
 * while callers sleep, else the progress thread. Whoever dispatches completions (the progress
 * thread or a caller with the token) then wakes, by bit, the sleeping callers whose futures are
 * done ({@link #wakeOwners}): a woken caller whose answer came first is one wake-up, one whose
 * answer another thread dispatched is two, as it was for every answer before.
 *
 * <p>No wake-up is lost: a ring disarms the word, and whoever arms it again ({@link
 * Doorbell#ARMED_HERE}) polls before it sleeps or leaves, so what was posted while nobody was
 * armed is read; a caller marks itself asleep before its last look at its future, and the
 * dispatcher completes the future before it reads the marks (both full fences), and every wake
 * counts in the word, so a caller about to sleep returns at once. A caller sleeps at most
 * {@link #MAX_SLEEP_NANOS} at a time: a future completed off the completion path (a deadline's
 * timer, a failure on another thread) is seen that late at most.
 */
final class DoorbellWatch {

    /** Callers that may sleep on the doorbell at once; more wait as before (their futures). */
    static final int SLOTS = 31;
    private static final int ALL = (1 << SLOTS) - 1;
    /** The longest single sleep of a caller. */
    static final long MAX_SLEEP_NANOS = 2_000_000L;

    private final FabricTransport transport;
    private final ProgressLoop loop;
    private final CallerProgress callers;
    private final FabricToken token;
    private final Doorbell doorbell;
    /** The callers' wake bits in use. */
    private final AtomicInteger claimed = new AtomicInteger();
    /** What each caller waits for, by the index of its bit; read by the dispatchers. */
    private final AtomicReferenceArray<Future<?>> awaited = new AtomicReferenceArray<>(SLOTS);
    private volatile boolean closed;
    /** Sleeps of callers on the doorbell; for tests and diagnostics. */
    final LongAdder sleeps = new LongAdder();
    /** Wake-ups of callers by a dispatcher that completed their futures; for tests and diagnostics. */
    final LongAdder ownerWakes = new LongAdder();

    DoorbellWatch(FabricTransport transport, ProgressLoop loop, CallerProgress callers, Doorbell doorbell) {
        this.transport = transport;
        this.loop = loop;
        this.callers = callers;
        this.token = loop.token();
        this.doorbell = doorbell;
    }

    /**
     * Waits up to {@code nanos} for {@code done}, sleeping on the doorbell and dispatching
     * completions when its ring wakes this thread; true if it is done. False at once (the caller
     * then waits as usual) if every wake bit is in use or the transport is closing.
     */
    boolean await(Future<?> done, long nanos) {
        if (done.isDone()) {
            return true;
        }
        if (nanos <= 0 || closed) {
            return false;
        }
        int bit = claim();
        if (bit == 0) {
            return false;
        }
        int index = Integer.numberOfTrailingZeros(bit);
        awaited.set(index, done);
        long deadline = System.nanoTime() + nanos;
        try {
            while (!done.isDone() && !closed && !transport.isClosed()) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    break;
                }
                long armed = doorbell.arm();
                if ((armed & Doorbell.ARMED_HERE) != 0) {
                    pollArmed(); // nobody polls what came while the word was disarmed but this thread
                    continue;
                }
                doorbell.asleep(bit);
                if (done.isDone()) { // completed before the mark was seen: no dispatcher wakes it
                    doorbell.awake(bit);
                    break;
                }
                sleeps.increment();
                doorbell.await((int) armed, bit, Math.min(left, MAX_SLEEP_NANOS));
                doorbell.awake(bit);
            }
            return done.isDone();
        } finally {
            awaited.set(index, null);
            release(bit);
            // A ring that woke this thread disarmed the word: while others sleep on it, it is
            // armed again, and what came meanwhile read, before this thread goes. (Whoever goes
            // to sleep later arms it first.)
            if (!closed && !transport.isClosed() && (doorbell.sleepingCallers() != 0 || loop.parked())
                    && (doorbell.arm() & Doorbell.ARMED_HERE) != 0) {
                pollArmed();
            }
        }
    }

    /**
     * Reads the completion queue until it is empty, with the token; or leaves it to the progress
     * thread if that holds the token (it works, and polls again before it sleeps).
     */
    private void pollArmed() {
        for (int spins = 0; ; spins++) {
            if (token.tryAcquire()) {
                try {
                    if (!transport.isClosed()) {
                        while (callers.pollHeld() > 0) {
                            // until empty: the ring of anything posted from now on wakes a sleeper
                        }
                    }
                } finally {
                    token.release();
                }
                return;
            }
            if (token.holder() == loop.thread() || transport.isClosed()) {
                return;
            }
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield(); // another caller posts or polls: a few microseconds
            }
        }
    }

    /**
     * Wakes the sleeping callers whose futures are done: the token's holder, after dispatching.
     * One read when no caller sleeps.
     */
    void wakeOwners() {
        assert loop.holdsFabric();
        int asleep = closed ? 0 : doorbell.sleepingCallers();
        if (asleep == 0) {
            return;
        }
        int wake = 0;
        for (int m = asleep; m != 0; m &= m - 1) {
            int bit = m & -m;
            Future<?> f = awaited.get(Integer.numberOfTrailingZeros(bit));
            if (f != null && f.isDone()) {
                wake |= bit;
            }
        }
        if (wake != 0 && (wake = doorbell.awake(wake)) != 0) {
            ownerWakes.increment();
            doorbell.wake(wake);
        }
    }

    private int claim() {
        for (;;) {
            int c = claimed.get();
            int free = ~c & ALL;
            if (free == 0) {
                return 0;
            }
            int bit = free & -free;
            if (claimed.compareAndSet(c, c | bit)) {
                return bit;
            }
        }
    }

    private void release(int bit) {
        int c;
        do {
            c = claimed.get();
        } while (!claimed.compareAndSet(c, c & ~bit));
    }

    /**
     * Shutdown, before the doorbell goes: wakes every sleeping caller and waits (a second at
     * most) until none is inside, so that none touches the doorbell's memory after it is unmapped.
     */
    void close() {
        closed = true;
        long until = System.nanoTime() + 1_000_000_000L;
        while (claimed.get() != 0 && System.nanoTime() < until) {
            doorbell.wake(ALL);
            Thread.yield();
        }
    }
}
