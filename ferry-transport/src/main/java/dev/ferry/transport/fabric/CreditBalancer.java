package dev.ferry.transport.fabric;

import java.util.List;

import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportConfig;

/**
 * Receive credits across links. Every credit owed goes back within a review period; on a
 * receive queue that all links share (a reliable-datagram endpoint or a shared receive context)
 * it also keeps the count of buffers posted and granted, and moves grants: credits go back from
 * links idle for {@link #IDLE_LINK_NANOS} (down to {@link #CREDIT_FLOOR}), and links with recent
 * traffic are granted more, up to {@code receiveBuffersPerLink}. Progress thread only.
 */
final class CreditBalancer {

    /** Credits an idle link keeps: a message and the reserve for credit returns. */
    static final int CREDIT_FLOOR = ReceiveCredits.RESERVE + 2;
    /** How often grants are reviewed (and owed credits flushed). */
    static final long REVIEW_NANOS = 10_000_000L;
    /**
     * A link with no frame for this long gives its credits above the floor back. Longer than a
     * training step: a worker's link that is quiet between steps (100-150 ms at 16 pushers) keeps
     * its grant instead of giving it back and asking for it again every step.
     */
    private static final long IDLE_LINK_NANOS = 1_000_000_000L;
    /** A link with a frame this recent may be granted more, up to receiveBuffersPerLink. */
    private static final long ACTIVE_LINK_NANOS = 20_000_000L;

    private final FabricTransport transport;
    private final TransportConfig config;
    private final RegisteredAllocator allocator;
    private final FabricCounters counters;
    private final boolean sharedQueue;
    /** Shared receive queue: buffers posted, and credits granted to live links. */
    private long sharedPosted;
    private long sharedGranted;

    CreditBalancer(FabricTransport transport) {
        this.transport = transport;
        this.config = transport.config;
        this.allocator = transport.allocator;
        this.counters = transport.counters;
        this.sharedQueue = transport.sharedQueue;
    }

    long sharedPosted() {
        return sharedPosted;
    }

    long sharedGranted() {
        return sharedGranted;
    }

    /** A new link on the shared queue: {@code posted} more buffers, {@code granted} more credits. */
    void shared(long posted, long granted) {
        sharedPosted += posted;
        sharedGranted += granted;
    }

    /** {@code link} is gone or retired: its grant on the shared queue is free for others. */
    void withdraw(Link link) {
        if (sharedQueue && link.granted > 0) {
            sharedGranted -= link.granted;
            link.granted = 0;
        }
    }

    /**
     * The periodic review: flushes owed credits and, on a shared queue, moves grants. The
     * control frames and grants queued.
     */
    int review(long now) {
        assert transport.holdsFabric();
        flushCredits();
        return sharedQueue ? rebalance(now) : 0;
    }

    /**
     * Every credit owed goes back within a review period, however few, and every release of a
     * message by reference that no eager frame carried ({@link PendingReleases}): the thresholds of
     * {@link ReceiveCredits#shouldReturn} assume this side counts exactly what the peer holds,
     * and a link must stay live even where that count is off.
     */
    private void flushCredits() {
        List<Link> links = transport.links.all();
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            if (link.ready && link.credits.owed() > 0 && link.peer.failure() == null) {
                link.credits.flush();
                transport.sends.activate(link);
            }
            if (link.ready && link.releases.size() > 0 && link.peer.failure() == null) {
                if (!transport.sends.flushReleases(link)) {
                    transport.links.linkFailure(link, "out of control buffers");
                }
            }
        }
    }

    /**
     * Reviews the grants of a shared receive queue: credits go back from idle links, and links
     * with recent traffic are granted more from what no link holds (half of it at a time, so
     * that one busy peer cannot take it all at once).
     */
    private int rebalance(long now) {
        long queue = Math.max(CREDIT_FLOOR, transport.links.receiveQueueEntries());
        int want = config.receiveBuffersPerLink() + ReceiveCredits.RESERVE;
        int work = 0;
        List<Link> links = transport.links.all();
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            // Only links the peer has spoken on: before that, its side may not know the link yet
            // and would drop a grant or a RECLAIM sent to it.
            if (!link.ready || !link.heard || link.peer.failure() != null || link.reclaimPending) {
                continue;
            }
            long quiet = now - link.lastArrivalNanos;
            if (quiet > IDLE_LINK_NANOS && link.granted > CREDIT_FLOOR) {
                // Credits not yet returned are taken back without asking; the rest the peer gives.
                int kept = link.credits.keepOwed(link.granted - CREDIT_FLOOR);
                link.granted -= kept;
                sharedGranted -= kept;
                counters.creditsReclaimed.add(kept);
                int ask = Math.min(link.granted, link.credits.peerHeld()) - CREDIT_FLOOR;
                if (ask <= 0) {
                    continue;
                }
                if (!transport.sends.queueControl(link, FrameDescriptor.RECLAIM, ask)) {
                    return work;
                }
                link.reclaimPending = true;
                work++;
            } else if (quiet < ACTIVE_LINK_NANOS && link.granted < want) {
                int extra = (int) Math.min(want - link.granted, (queue - sharedGranted) / 2);
                while (sharedPosted < sharedGranted + extra) {
                    RegisteredBuffer b = allocator.tryAllocate(PoolKind.RECEIVE, transport.receiveBytes);
                    if (b == null) {
                        break;
                    }
                    transport.receives.postShared(b);
                    sharedPosted++;
                }
                extra = (int) Math.min(extra, sharedPosted - sharedGranted);
                if (extra > 0) {
                    sharedGranted += extra;
                    link.granted += extra;
                    link.credits.grant(extra);
                    counters.creditsGranted.add(extra);
                    transport.sends.activate(link);
                    work++;
                }
            }
        }
        return work;
    }

    /**
     * The peer gave back {@code given} credits of {@code link} that a RECLAIM asked for; false
     * if it was not asked or gave more than it holds (the caller fails the link).
     */
    boolean onYield(Link link, int given) {
        if (!link.reclaimPending || given > link.credits.window() - CREDIT_FLOOR || given > link.credits.peerHeld()) {
            return false;
        }
        link.reclaimPending = false;
        link.credits.withdrawn(given);
        link.granted -= given;
        sharedGranted -= given;
        counters.creditsReclaimed.add(given);
        return true;
    }
}
