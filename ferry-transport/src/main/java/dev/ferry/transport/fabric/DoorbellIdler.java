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

    /** How long {@link #everyPeerRings()} keeps its answer. */
    private static final long RINGS_CHECK_NANOS = 1_000_000L;

    private final FabricTransport transport;
    private final ProgressLoop loop;
    private final Doorbell doorbell;
    /** Progress thread: the last answer of {@link #everyPeerRings()} and when it was taken. */
    private boolean everyPeerRings;
    private long ringsCheckedAt = System.nanoTime() - RINGS_CHECK_NANOS;
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
                // The waiters read again now that the doorbell is armed: a sender that began to
                // wait after the loop read them rang before the arm (lost) or rings after it.
                long nanos = busy || loop.awaitsCompletions() || !everyPeerRings() ? sliceNanos
                        : CreditBalancer.REVIEW_NANOS;
                loop.lend(); // a caller may post or poll meanwhile
                try {
                    doorbell.await(nanos);
                } finally {
                    loop.takeBack();
                }
            }
            return 0;
        } finally {
            doorbell.disarm();
        }
    }

    /**
     * Whether every peer rings this side's doorbell after posting to it. Walking the peer map
     * allocates an iterator, so the answer is kept for {@link #RINGS_CHECK_NANOS}: a peer that
     * cannot ring and joined since then costs at most one longer sleep, never a lost message.
     */
    private boolean everyPeerRings() {
        assert loop.holdsFabric();
        long now = System.nanoTime();
        if (now - ringsCheckedAt >= RINGS_CHECK_NANOS) {
            ringsCheckedAt = now;
            everyPeerRings = true;
            for (FabricPeer peer : transport.peers.values()) {
                if (peer.doorbell == null) {
                    everyPeerRings = false;
                    break;
                }
            }
        }
        return everyPeerRings;
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
