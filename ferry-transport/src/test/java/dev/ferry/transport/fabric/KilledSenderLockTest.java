package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

/** The evidence {@link KilledSenderLock} needs before it takes a lock for abandoned. */
class KilledSenderLockTest {

    private static final long WINDOW = 100;
    private static final long LOCK_WINDOW = 400;
    private static final long WATCH = 300;

    @Test
    void aLockAndATokenHeldThroughTheWholeWindowAreAbandoned() throws Exception {
        Thread stuck = new Thread(() -> { });
        KilledSenderLock watch = new KilledSenderLock(() -> true, () -> stuck, () -> 7, WINDOW, LOCK_WINDOW);
        long started = System.nanoTime();
        assertTrue(watch.awaitAbandoned(WATCH));
        assertTrue(System.nanoTime() - started >= WINDOW * 1_000_000L, "decided before a whole window");
    }

    @Test
    void aLockSeenFreeOnceInEveryWindowIsNotAbandoned() throws Exception {
        AtomicInteger samples = new AtomicInteger();
        Thread stuck = new Thread(() -> { });
        // Free at every 10th sample: a lock that is taken and given back.
        KilledSenderLock watch = new KilledSenderLock(() -> samples.incrementAndGet() % 10 != 0, () -> stuck, () -> 7, WINDOW, LOCK_WINDOW);
        assertFalse(watch.awaitAbandoned(2 * LOCK_WINDOW));
    }

    @Test
    void aTokenThatIsTakenAgainIsNotAStuckHolder() throws Exception {
        AtomicLong acquisitions = new AtomicLong();
        Thread progress = new Thread(() -> { });
        KilledSenderLock watch = new KilledSenderLock(() -> true, () -> progress, acquisitions::incrementAndGet, WINDOW, LOCK_WINDOW);
        assertFalse(watch.awaitAbandoned(WATCH));
    }

    @Test
    void aLockHeldWhileNobodyHoldsTheTokenTakesTheLongerWindow() throws Exception {
        KilledSenderLock watch = new KilledSenderLock(() -> true, () -> null, () -> 7, WINDOW, LOCK_WINDOW);
        assertFalse(watch.awaitAbandoned(WATCH), "abandoned before the lock's own window");
        long started = System.nanoTime();
        assertTrue(new KilledSenderLock(() -> true, () -> null, () -> 7, WINDOW, LOCK_WINDOW).awaitAbandoned(2 * LOCK_WINDOW));
        assertTrue(System.nanoTime() - started >= LOCK_WINDOW * 1_000_000L, "decided before the lock's whole window");
    }

    @Test
    void aTokenTakenAgainStillMeetsTheLongerWindowIfTheLockNeverBreaks() throws Exception {
        AtomicLong acquisitions = new AtomicLong();
        Thread progress = new Thread(() -> { });
        assertTrue(new KilledSenderLock(() -> true, () -> progress, acquisitions::incrementAndGet, WINDOW, LOCK_WINDOW)
                .awaitAbandoned(2 * LOCK_WINDOW));
    }

    @Test
    void aLockThatCannotBeReadIsLeftAlone() throws Exception {
        Thread stuck = new Thread(() -> { });
        KilledSenderLock watch = new KilledSenderLock(() -> null, () -> stuck, () -> 7, WINDOW, LOCK_WINDOW);
        assertFalse(watch.awaitAbandoned(WATCH));
    }

    @Test
    void theHolderChangingRestartsTheWindow() throws Exception {
        Thread a = new Thread(() -> { });
        Thread b = new Thread(() -> { });
        AtomicInteger samples = new AtomicInteger();
        KilledSenderLock watch = new KilledSenderLock(() -> true, () -> samples.incrementAndGet() % 20 < 10 ? a : b, () -> 7, WINDOW, LOCK_WINDOW);
        assertFalse(watch.awaitAbandoned(WATCH));
    }
}
