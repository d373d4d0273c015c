package dev.ferry.transport.fabric;

import java.nio.channels.FileChannel;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

import dev.ferry.fabric.ShmRegionLocks;

/**
 * Frees this process's own shm region lock when a peer that died left it held.
 *
 * <p>libfabric 1.17's shm sender takes the <em>receiver's</em> region lock inside {@code
 * fi_send}. A peer killed there leaves this process's own region locked. Then every other
 * process's next send to this one spins in {@code fi_send} for ever, and so does this process's
 * next completion-queue read once a sender has signalled it (it processes its commands under
 * that lock), holding the {@link FabricToken}: this process's progress thread and every peer it
 * serves stop. A spin lock has no owner, so the holder cannot be asked; the lock is released
 * only on evidence that nobody alive holds it. A peer of this process must just have died (its
 * owner lock on its region proven gone), and then either
 * <ul>
 *   <li>this process's own region lock is held at every sample through {@link #LOCK_WINDOW_MILLIS}
 *       (every critical section under it lasts microseconds to a few milliseconds: one command,
 *       or one copy of a message), or</li>
 *   <li>it is held at every sample through {@link #WINDOW_MILLIS} while one thread of this
 *       process holds the fabric token without giving it back (no new acquisition): the thread
 *       that calls libfabric here is stuck inside it, on this lock.</li>
 * </ul>
 * A live holder descheduled for that whole time would meet them; on a loaded two-core machine a
 * thread waits tens of milliseconds for a core, not seconds.
 *
 * <p>Runs on a virtual thread of the control plane, which never calls libfabric; it only reads
 * the token's holder and count, and maps the region afresh for each sample.
 */
final class KilledSenderLock {

    /** How long the lock and the token must both stay held before the lock is taken for abandoned. */
    static final long WINDOW_MILLIS = 1_000;
    /** How long the lock alone must stay held before it is taken for abandoned. */
    static final long LOCK_WINDOW_MILLIS = 3_000;
    /** The longest watch after a peer's death: past both windows, however the samples were spaced. */
    static final long WATCH_MILLIS = 10_000;
    /** Time between two samples. */
    private static final long SAMPLE_MILLIS = 2;

    /** What one sample reads; the lock's state is null when it cannot be read. */
    interface Probe {
        Boolean lockHeld();
    }

    private final Probe lock;
    private final Supplier<Thread> tokenHolder;
    private final LongSupplier tokenAcquisitions;
    private final long windowNanos;
    private final long lockWindowNanos;

    /** Watches {@code ownRegion} (this process's own, from {@link ShmRegionLocks#open}) and {@code token}. */
    KilledSenderLock(FileChannel ownRegion, FabricToken token) {
        this(() -> ShmRegionLocks.held(ownRegion), token::holder, token::acquisitions, WINDOW_MILLIS, LOCK_WINDOW_MILLIS);
    }

    /** With the samples taken from the suppliers given and the two windows; for tests. */
    KilledSenderLock(Probe lock, Supplier<Thread> tokenHolder, LongSupplier tokenAcquisitions, long windowMillis,
            long lockWindowMillis) {
        this.lock = lock;
        this.tokenHolder = tokenHolder;
        this.tokenAcquisitions = tokenAcquisitions;
        this.windowNanos = windowMillis * 1_000_000L;
        this.lockWindowNanos = lockWindowMillis * 1_000_000L;
    }

    /**
     * Samples until the lock has been held through a whole window, with or without the token
     * (true: the lock is abandoned), or until it is seen free or unreadable, or {@code
     * watchMillis} have passed (false). A dead holder never gives the lock back, so one sample
     * that finds it free ends the watch: the peer that died did not hold it.
     */
    boolean awaitAbandoned(long watchMillis) throws InterruptedException {
        long since = System.nanoTime();
        long end = since + watchMillis * 1_000_000L;
        long tokenSince = 0;
        Thread holder = null;
        long acquisitions = 0;
        while (Boolean.TRUE.equals(lock.lockHeld())) {
            long now = System.nanoTime();
            Thread h = tokenHolder.get();
            long a = tokenAcquisitions.getAsLong();
            if (h == null) {
                holder = null;
            } else if (h != holder || a != acquisitions) {
                holder = h;
                acquisitions = a;
                tokenSince = now;
            }
            if (now - since >= lockWindowNanos || holder != null && now - tokenSince >= windowNanos) {
                return true;
            }
            if (now - end > 0) {
                return false;
            }
            Thread.sleep(SAMPLE_MILLIS);
        }
        return false;
    }
}
