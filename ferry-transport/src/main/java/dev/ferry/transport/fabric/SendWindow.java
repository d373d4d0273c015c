package dev.ferry.transport.fabric;

/**
 * The software send window: bytes in flight (posted and not completed, or advertised for a
 * rendezvous and not released) capped per link, per peer and per process, independently of
 * receive credits. A message larger than a window passes alone when that window is empty, so
 * nothing is stuck forever.
 */
final class SendWindow {

    private final long perLink;
    private final long perPeer;
    private final long perProcess;
    private long inFlight;
    private long peak;

    SendWindow(long perLink, long perPeer, long perProcess) {
        this.perLink = perLink;
        this.perPeer = perPeer;
        this.perProcess = perProcess;
    }

    /** Takes room for {@code bytes} on {@code link}, or returns false if a window is full. */
    synchronized boolean tryAcquire(Link link, long bytes) {
        FabricPeer peer = link.peer;
        if (!fits(link.inFlight, bytes, perLink) || !fits(peer.inFlight, bytes, perPeer)
                || !fits(inFlight, bytes, perProcess)) {
            return false;
        }
        link.inFlight += bytes;
        peer.inFlight += bytes;
        inFlight += bytes;
        peak = Math.max(peak, inFlight);
        return true;
    }

    private static boolean fits(long used, long bytes, long limit) {
        return used == 0 || used + bytes <= limit;
    }

    /** Gives back what {@link #tryAcquire} took. */
    synchronized void release(Link link, long bytes) {
        link.inFlight -= bytes;
        link.peer.inFlight -= bytes;
        inFlight -= bytes;
    }

    synchronized long inFlight() {
        return inFlight;
    }

    synchronized long peak() {
        return peak;
    }
}
