package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.PsException;

/** The three outcomes of {@link PushLocks#lockOrBusy}: taken, {@code BUSY}, {@code CLOSED} when interrupted. */
class PushLocksTest {

    @Test
    void aFreeLockIsTakenAndHeldByTheCaller() {
        ReentrantLock lock = new ReentrantLock();
        PushLocks.lockOrBusy(lock, TimeUnit.MILLISECONDS.toNanos(100), "the pushes ahead of it");
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        // No time left at all still takes a free lock: the deadline bounds the wait, not the try.
        PushLocks.lockOrBusy(lock, -5, "the pushes ahead of it");
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
    }

    @Test
    void aLockHeldPastTheWaitIsRefusedBusyAndNotTaken() throws Exception {
        ReentrantLock lock = new ReentrantLock();
        try (Holder _ = Holder.of(lock)) {
            long start = System.nanoTime();
            PsException e = assertThrows(PsException.class,
                    () -> PushLocks.lockOrBusy(lock, TimeUnit.MILLISECONDS.toNanos(50), "the forwards ahead of it"));
            assertEquals(PsException.Code.BUSY, e.code());
            assertTrue(e.getMessage().contains("not applied") && e.getMessage().contains("the forwards ahead of it"),
                    e.getMessage());
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(50), "waited the whole 50 ms");
            assertFalse(lock.isHeldByCurrentThread());
            assertFalse(Thread.currentThread().isInterrupted());
        }
    }

    @Test
    void anInterruptedWaitIsRefusedClosedAndKeepsTheInterrupt() throws Exception {
        ReentrantLock lock = new ReentrantLock();
        try (Holder _ = Holder.of(lock)) {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicBoolean interruptedAfter = new AtomicBoolean();
            AtomicBoolean held = new AtomicBoolean(true);
            CountDownLatch waiting = new CountDownLatch(1);
            Thread pusher = new Thread(() -> {
                waiting.countDown();
                try {
                    PushLocks.lockOrBusy(lock, TimeUnit.SECONDS.toNanos(30), "the pushes ahead of it");
                } catch (Throwable t) {
                    failure.set(t);
                }
                interruptedAfter.set(Thread.currentThread().isInterrupted());
                held.set(lock.isHeldByCurrentThread());
            }, "pusher");
            pusher.start();
            waiting.await();
            while (!lock.hasQueuedThread(pusher)) {
                Thread.onSpinWait();
            }
            pusher.interrupt();
            pusher.join(10_000);
            assertFalse(pusher.isAlive(), "the interrupted push returned");
            PsException e = (PsException) failure.get();
            assertEquals(PsException.Code.CLOSED, e.code());
            assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
            assertTrue(interruptedAfter.get(), "the interrupt is kept for the caller's thread");
            assertFalse(held.get());
        }
    }

    /** A thread that holds {@code lock} until closed. */
    private record Holder(Thread thread, CountDownLatch release) implements AutoCloseable {
        static Holder of(ReentrantLock lock) throws InterruptedException {
            CountDownLatch taken = new CountDownLatch(1);
            CountDownLatch release = new CountDownLatch(1);
            Thread t = new Thread(() -> {
                lock.lock();
                try {
                    taken.countDown();
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    lock.unlock();
                }
            }, "holder");
            t.start();
            taken.await();
            return new Holder(t, release);
        }

        @Override
        public void close() {
            release.countDown();
            try {
                thread.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while the holder let go", e);
            }
        }
    }
}
