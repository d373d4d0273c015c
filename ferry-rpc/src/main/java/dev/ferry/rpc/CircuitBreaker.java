package dev.ferry.rpc;

import java.util.ArrayDeque;

/**
 * Decides when a server's traffic leaves the fabric for the fallback transport, and when it
 * may try the fabric again. Closed: traffic on the fabric, failures counted in a sliding
 * window. Open (that many failures within the window): traffic on the fallback, and every
 * probe interval a background probe of the fabric; the probe's success closes it.
 * Thread-safe.
 */
final class CircuitBreaker {

    private final String name;
    private final int threshold;
    private final long windowNanos;
    private final long probeNanos;
    private final ArrayDeque<Long> failures = new ArrayDeque<>();
    private boolean open;
    private long nextProbeNanos;
    private long opened;
    private long closed;
    private long openedAtNanos;

    CircuitBreaker(String name, int threshold, long windowNanos, long probeNanos) {
        this.name = name;
        this.threshold = threshold;
        this.windowNanos = windowNanos;
        this.probeNanos = probeNanos;
    }

    /** Records a fabric failure; true if it opened the breaker. */
    synchronized boolean failure(long nowNanos) {
        if (open) {
            nextProbeNanos = nowNanos + probeNanos;
            return false;
        }
        failures.addLast(nowNanos);
        while (!failures.isEmpty() && nowNanos - failures.peekFirst() > windowNanos) {
            failures.removeFirst();
        }
        if (failures.size() >= threshold) {
            open = true;
            opened++;
            openedAtNanos = nowNanos;
            dev.ferry.rpc.events.RpcEvents.breakerOpened(name, failures.size(), windowNanos);
            failures.clear();
            nextProbeNanos = nowNanos + probeNanos;
            return true;
        }
        return false;
    }

    /** Records a fabric session that came up; true if it closed the breaker. */
    synchronized boolean success() {
        failures.clear();
        if (open) {
            open = false;
            closed++;
            dev.ferry.rpc.events.RpcEvents.breakerClosed(name, System.nanoTime() - openedAtNanos);
            return true;
        }
        return false;
    }

    synchronized boolean isOpen() {
        return open;
    }

    /** True if open and a probe is due; the caller probes, and calls {@link #failure} or {@link #success}. */
    synchronized boolean probeDue(long nowNanos) {
        if (open && nowNanos - nextProbeNanos >= 0) {
            nextProbeNanos = nowNanos + probeNanos;
            return true;
        }
        return false;
    }

    synchronized long opened() {
        return opened;
    }

    synchronized long closed() {
        return closed;
    }
}
