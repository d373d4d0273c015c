package dev.ferry.transport.fabric;

import java.util.concurrent.atomic.AtomicInteger;

/**
 * The software send window: bytes in flight (posted and not completed, or advertised for a
 * rendezvous and not released) capped per link, per peer and per process, independently of
 * receive credits. A message larger than a window passes alone when that window is empty, so
 * nothing is stuck forever.
 *
 * <p>On links and peers, eager bytes and rendezvous bytes have windows of their own: eager
 * bytes are pushed into the fabric, rendezvous bytes only advertised, and the receiver pulls
 * them at its own pace. Kept apart, a large transfer filling its window never holds back the
 * small messages behind it on the same link. The process window counts both together: it is
 * the hard cap on all bytes in flight (only a message larger than it, passing alone, makes
 * everything else wait for it).
 *
 * <p>It also says whether anybody waits for sends to complete ({@link #awaited}): a thread on a
 * send's future, a sender on the send pool, a message the window refused. Only then must an
 * idle progress thread whose completions do not wake it (shm) reap them within a short slice;
 * else the bytes in flight are reaped on its next turn of work or timer.
 */
final class SendWindow {

    private final long perLink;
    private final long perPeer;
    private final long perProcess;
    private final long eagerThreshold;
    private long eagerInFlight;
    private long rendezvousInFlight;
    private long peak;
    /** A message was refused since room was last given back: a sender waits for room. */
    private boolean refused;
    /** Sends in flight with a future a thread may wait on. */
    private final AtomicInteger awaitedSends = new AtomicInteger();
    /** Senders waiting for a send buffer, which completions give back. */
    private final AtomicInteger poolWaiters = new AtomicInteger();

    /** Messages above {@code eagerThreshold} bytes count as rendezvous. */
    SendWindow(long perLink, long perPeer, long perProcess, long eagerThreshold) {
        this.perLink = perLink;
        this.perPeer = perPeer;
        this.perProcess = perProcess;
        this.eagerThreshold = eagerThreshold;
    }

    /** Takes room for {@code bytes} on {@code link}, or returns false if a window is full. */
    synchronized boolean tryAcquire(Link link, long bytes) {
        FabricPeer peer = link.peer;
        if (bytes > eagerThreshold) {
            if (!fits(link.rendezvousInFlight, bytes, perLink) || !fits(peer.rendezvousInFlight, bytes, perPeer)
                    || !fits(eagerInFlight + rendezvousInFlight, bytes, perProcess)) {
                refused = true;
                return false;
            }
            link.rendezvousInFlight += bytes;
            peer.rendezvousInFlight += bytes;
            rendezvousInFlight += bytes;
        } else {
            if (!fits(link.inFlight, bytes, perLink) || !fits(peer.inFlight, bytes, perPeer)
                    || !fits(eagerInFlight + rendezvousInFlight, bytes, perProcess)) {
                refused = true;
                return false;
            }
            link.inFlight += bytes;
            peer.inFlight += bytes;
            eagerInFlight += bytes;
        }
        peak = Math.max(peak, eagerInFlight + rendezvousInFlight);
        return true;
    }

    private static boolean fits(long used, long bytes, long limit) {
        return used == 0 || used + bytes <= limit;
    }

    /** Gives back what {@link #tryAcquire} took. */
    synchronized void release(Link link, long bytes) {
        refused = false; // a refused sender tries again, and says so again if it must
        if (bytes > eagerThreshold) {
            link.rendezvousInFlight -= bytes;
            link.peer.rendezvousInFlight -= bytes;
            rendezvousInFlight -= bytes;
        } else {
            link.inFlight -= bytes;
            link.peer.inFlight -= bytes;
            eagerInFlight -= bytes;
        }
    }

    /** Bytes in flight, eager and rendezvous. */
    synchronized long inFlight() {
        return eagerInFlight + rendezvousInFlight;
    }

    synchronized long peak() {
        return peak;
    }

    /** A send with a future was submitted: any thread. */
    void awaitedSendStarted() {
        awaitedSends.incrementAndGet();
    }

    /** A send with a future settled it: whoever finished the frame, once per send. */
    void awaitedSendDone() {
        awaitedSends.decrementAndGet();
    }

    /** Sends counted as awaited now; for tests (0 once every awaited send settled). */
    int awaitedSendsForTest() {
        return awaitedSends.get();
    }

    /** A sender starts ({@code true}) or stops waiting for a send buffer. */
    void senderWaits(boolean waits) {
        if (waits) {
            poolWaiters.incrementAndGet();
        } else {
            poolWaiters.decrementAndGet();
        }
    }

    /**
     * Whether a thread waits for some send to complete: a future, the send pool, or room in this
     * window. Then the completions of sends in flight must be reaped soon.
     */
    boolean awaited() {
        if (awaitedSends.get() > 0 || poolWaiters.get() > 0) {
            return true;
        }
        synchronized (this) {
            return refused && eagerInFlight + rendezvousInFlight > 0;
        }
    }
}
