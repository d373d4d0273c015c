package dev.ferry.ps.net;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferry.ps.PsException;

/**
 * The one way a push waits for the pushes ahead of it on the same slot groups (a move's
 * forwarding lock, a group's replication lock): within its deadline, else it is refused {@code
 * BUSY} before it changed anything, which its client sends again.
 */
final class PushLocks {

    private PushLocks() {
    }

    /**
     * Takes {@code lock} within {@code waitNanos}.
     *
     * @param heldBy who held it, for the refusal: "the pushes ... ahead of it"
     * @throws PsException {@code BUSY} if the time ran out, {@code CLOSED} if interrupted; either way
     *                     the push changed nothing
     */
    static void lockOrBusy(ReentrantLock lock, long waitNanos, String heldBy) {
        try {
            if (!lock.tryLock(Math.max(0, waitNanos), TimeUnit.NANOSECONDS)) {
                throw new PsException(PsException.Code.BUSY, "the push was not applied: " + heldBy
                        + " took its whole deadline");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PsException(PsException.Code.CLOSED, "the push was not applied: interrupted");
        }
    }
}
