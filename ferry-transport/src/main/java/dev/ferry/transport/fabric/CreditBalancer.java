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
 * traffic are granted more, up to {@code receiveBuffersPerLink}.
 *
 * <p>Busy links never take the whole queue: {@link #headroom} entries stay free for links that
 * join (a worker that starts late, or reconnects), and where the queue cannot give every link in
 * use all it wants, each gets an equal share of what the idle ones leave; a link above its share
 * gives the rest back. Progress thread only.
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
     * Entries of a shared queue of {@code queue} that busy links do not grow into: room for links
     * that join to be let in at their minimum grant, at least two links' worth (an eighth of a
     * large queue, at most half of a small one).
     */
    static long headroom(long queue) {
        return Math.min(queue / 2, Math.max(2L * CREDIT_FLOOR, queue / 8));
    }

    /**
     * Reviews the grants of a shared receive queue: credits go back from idle links, and links
     * with recent traffic are granted more from what no link holds (half of it at a time, so
     * that one busy peer cannot take it all at once), up to their share ({@link #share}) and never
     * into the {@link #headroom}; a link above its share gives back the rest.
     */
    private int rebalance(long now) {
        long queue = Math.max(CREDIT_FLOOR, transport.links.receiveQueueEntries());
        long room = queue - headroom(queue);
        int share = share(now, room);
        int work = 0;
        List<Link> links = transport.links.all();
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            if (!rebalanced(link)) {
                continue;
            }
            int keep = idle(link, now) ? CREDIT_FLOOR : share;
            if (link.granted > keep) {
                int asked = takeBack(link, keep);
                if (asked < 0) {
                    return work;
                }
                work += asked;
            } else if (now - link.lastArrivalNanos < ACTIVE_LINK_NANOS && link.granted < share) {
                // Half of what is left, rounded up: the last credit of the room is granted too.
                int extra = (int) Math.min(share - link.granted, (room - sharedGranted + 1) / 2);
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
     * Only links the peer has spoken on take part: before that, its side may not know the link
     * yet and would drop a grant or a RECLAIM sent to it.
     */
    private static boolean rebalanced(Link link) {
        return link.ready && link.heard && link.peer.failure() == null && !link.reclaimPending;
    }

    /** Whether {@code link} has had no frame for {@link #IDLE_LINK_NANOS}: it keeps only the floor. */
    private static boolean idle(Link link, long now) {
        return now - link.lastArrivalNanos > IDLE_LINK_NANOS;
    }

    /**
     * The grant of a link in use: {@code receiveBuffersPerLink} (and the reserve) if the
     * {@code room} left beside the idle links' grants holds that for every link in use; else an
     * equal part of it, never below {@link #CREDIT_FLOOR}.
     */
    private int share(long now, long room) {
        int want = config.receiveBuffersPerLink() + ReceiveCredits.RESERVE;
        long others = 0;
        int inUse = 0;
        List<Link> links = transport.links.all();
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            if (link.peer.failure() != null || link.retiredTo != null) {
                continue;
            }
            if (link.ready && link.heard && !idle(link, now)) {
                inUse++;
            } else {
                others += link.granted;
            }
        }
        if (inUse == 0 || (long) inUse * want <= room - others) {
            return want;
        }
        return (int) Math.max(CREDIT_FLOOR, Math.min(want, (room - others) / inUse));
    }

    /**
     * Takes {@code link}'s grant down towards {@code keep}: credits owed to the peer are kept
     * without asking, the rest the peer is asked for (RECLAIM; it gives what it holds). 1 if a
     * RECLAIM was queued, 0 if none was needed, -1 if no control buffer was free for it.
     */
    private int takeBack(Link link, int keep) {
        int kept = link.credits.keepOwed(link.granted - keep);
        link.granted -= kept;
        sharedGranted -= kept;
        counters.creditsReclaimed.add(kept);
        int ask = Math.min(link.granted - keep, link.credits.peerHeld() - CREDIT_FLOOR);
        if (ask <= 0) {
            return 0;
        }
        if (!transport.sends.queueControl(link, FrameDescriptor.RECLAIM, ask)) {
            return -1;
        }
        link.reclaimPending = true;
        return 1;
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
