package dev.ferry.transport.fabric;

import dev.ferry.fabric.CompletionBatch;

/**
 * Where the completion queue has no wait object (shm: only polling notices a completion): waits
 * on this side's {@link Doorbell}, which peers on this host ring after posting to it and
 * hand-overs ring too. Completions of this side's own operations do not ring, nor does a peer
 * without a doorbell, so while either may bring work the wait is one slice; else up to the next
 * timer. It polls once more after arming, so that nothing posted before the arm is missed.
 */
final class DoorbellIdler implements Idler {

    private final FabricTransport transport;
    private final ProgressLoop loop;
    private final Doorbell doorbell;
    /** Guarded by this: no thread rings the doorbell once it is closed. */
    private boolean closed;

    DoorbellIdler(FabricTransport transport, ProgressLoop loop, Doorbell doorbell) {
        this.transport = transport;
        this.loop = loop;
        this.doorbell = doorbell;
    }

    @Override
    public int sleep(CompletionBatch batch, boolean busy, long sliceNanos) {
        doorbell.arm();
        try {
            if (transport.isClosed()) {
                return 0;
            }
            int n = loop.poll(batch);
            if (n > 0) {
                return n;
            }
            if (transport.proxy.isEmpty()) {
                doorbell.await(busy || !everyPeerRings() ? sliceNanos : CreditBalancer.REVIEW_NANOS);
            }
            return 0;
        } finally {
            doorbell.disarm();
        }
    }

    /** Whether every peer rings this side's doorbell after posting to it. */
    private boolean everyPeerRings() {
        for (FabricPeer peer : transport.peers.values()) {
            if (peer.doorbell == null) {
                return false;
            }
        }
        return true;
    }

    @Override
    public synchronized void wake() {
        if (!closed) {
            doorbell.ring();
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
    }
}
