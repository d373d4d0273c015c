package dev.ferry.transport.fabric;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

import dev.ferry.fabric.FabricException;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.events.TransportEvents;

/**
 * Pulls the payloads of rendezvous messages with RDMA reads, in chunks of
 * {@code rendezvousChunkBytes}, at most {@link #MAX_READS} reads in flight, each into a buffer of
 * the rendezvous pool. A message whose reads have all arrived is released to its sender (RNDV_DONE)
 * and delivered in its stream's order, behind nothing and before what arrived after it. The
 * rendezvous pool paces this receiver's incast: where it has no room, pulls wait. With a pull
 * budget ({@link TransportConfig#pullBudgetBytes()}) the receiver also schedules the bytes on the
 * wire: while reads of more than one message are in flight, none of them pulled whole (below),
 * they never exceed the budget (one read always may) and a read is at most half the budget; the
 * chunks go to the message with the fewest
 * bytes left to pull (the oldest among equals), so messages finish one after another instead of
 * all at the end (Homa's SRPT grants); one chunk in {@link #OLDEST_EVERY} goes to the oldest
 * message waiting, so none starves behind a stream of shorter ones. A message is pulled whole,
 * in reads of {@code rendezvousChunkBytes} and a last read of half the budget, all requested at
 * once, when the other messages' reads in flight are down to half the budget: one sender's bytes
 * arrive no faster than its own link, so they do not queue at a receiver's port of the same
 * rate, and what can meet them there is those other bytes only. Its sender's progress thread is
 * woken once for the whole message (with software RMA every read is served by it), and that
 * wake-up overlaps the end of the message before it. Progress thread only.
 */
final class RendezvousPuller {

    /** Reads in flight at once, across all peers. */
    private static final int MAX_READS = 16;

    private final FabricTransport transport;
    private final OperationTable ops;
    private final RegisteredAllocator allocator;
    private final TransportConfig config;
    /** With a budget, one chunk in this many goes to the oldest message waiting. */
    static final int OLDEST_EVERY = 8;

    /** Messages with chunks still to request, in arrival order. */
    private final ArrayList<InboundFrame> pulls = new ArrayList<>();
    /** Reads posted since the transport started (the turn of the oldest message); read by tests. */
    private volatile long chunksPosted;
    private int readsInFlight;
    /** 0: no budget. */
    private final long budget;
    private final long chunkBytes;
    private long bytesInFlight;
    /** The most bytes of reads in flight at once; written by the progress thread, read by tests. */
    private volatile long peakBytesInFlight;
    /** The same, counted only while reads of more than one message were in flight, none pulled whole. */
    private volatile long peakSharedBytesInFlight;
    /** The most bytes of other messages' reads in flight when a message was pulled whole. */
    private volatile long peakOverlapBytes;

    RendezvousPuller(FabricTransport transport) {
        this.transport = transport;
        this.ops = transport.ops;
        this.allocator = transport.allocator;
        this.config = transport.config;
        this.budget = config.pullBudgetBytes();
        this.chunkBytes = budget == 0 ? config.rendezvousChunkBytes()
                : Math.max(1, Math.min(config.rendezvousChunkBytes(), budget / 2));
    }

    /** A rendezvous request arrived: its payload is pulled once reads and the pool allow. */
    void add(InboundFrame message) {
        pulls.add(message);
    }

    /** The most bytes of reads this receiver had in flight at once. */
    long peakBytesInFlight() {
        return peakBytesInFlight;
    }

    /** With a budget: the most bytes of reads in flight at once while more than one message had some. */
    long peakSharedBytesInFlight() {
        return peakSharedBytesInFlight;
    }

    /** With a budget: the most bytes of other messages' reads in flight when one was pulled whole. */
    long peakOverlapBytes() {
        return peakOverlapBytes;
    }

    /** The reads this receiver has posted. */
    long readsPosted() {
        return chunksPosted;
    }

    /** Whether reads are in flight or waiting: a completion is due without any peer's doing. */
    boolean busy() {
        return readsInFlight > 0 || !pulls.isEmpty();
    }

    /** Starts the reads there is room for; the number started. */
    int pull() {
        assert transport.holdsFabric();
        int started = 0;
        InboundFrame pinned = null; // a message pulled whole: its reads are all requested in one pass
        while (!pulls.isEmpty() && readsInFlight < MAX_READS) {
            int index = pinned != null ? pulls.indexOf(pinned) : budget > 0 ? nextIndex(pulls, chunksPosted) : 0;
            InboundFrame message = pulls.get(index);
            Link link = message.link;
            if (link.peer.failure() != null) {
                pulls.remove(index);
                pinned = null;
                continue;
            }
            if (message.target == null) {
                RegisteredBuffer target = allocator.tryAllocate(PoolKind.RENDEZVOUS, message.length);
                if (target == null) {
                    break; // the rendezvous pool paces this receiver's incast
                }
                message.target = target;
                message.view = target.segment().asSlice(0, message.length);
            }
            long left = message.length - message.requested;
            // Pulled whole: the other messages' reads in flight are at most half the budget.
            long others = bytesInFlight - (message.requested - message.pulled);
            boolean whole = budget > 0 && others <= chunkBytes;
            long chunk;
            if (whole) {
                chunk = left > chunkBytes ? Math.min(config.rendezvousChunkBytes(), left - chunkBytes) : left;
            } else {
                chunk = Math.min(chunkBytes, left);
                if (budget > 0 && readsInFlight > 0 && bytesInFlight + chunk > budget) {
                    break; // the budget is on the wire: the next read goes when one completes
                }
            }
            int slot = ops.take();
            if (slot < 0) {
                break;
            }
            boolean posted;
            try {
                posted = link.endpoint.read(message.target.segment().address() + message.requested, chunk,
                        message.target.descriptor(), link.address, message.remoteAddress + message.requested,
                        message.remoteKey, ops.context(slot));
            } catch (FabricException e) {
                // Refused outright (not a full queue): the link fails, and its pulls with it.
                ops.release(slot);
                transport.links.linkFailure(link, "rendezvous read refused by the provider: " + e.getMessage());
                pinned = null;
                continue;
            }
            if (!posted) {
                ops.release(slot);
                break;
            }
            ops.posted(slot, OperationTable.READ, message, link, chunk);
            message.requested += chunk;
            readsInFlight++;
            bytesInFlight += chunk;
            chunksPosted++;
            if (bytesInFlight > peakBytesInFlight) {
                peakBytesInFlight = bytesInFlight;
            }
            if (whole && others > peakOverlapBytes) {
                peakOverlapBytes = others;
            } else if (!whole && budget > 0 && bytesInFlight > peakSharedBytesInFlight) {
                peakSharedBytesInFlight = bytesInFlight;
            }
            started++;
            if (link.peer.doorbell != null) {
                link.peer.doorbell.ring(); // a provider may need the target to progress the read
            }
            if (message.requested == message.length) {
                pulls.remove(index);
                pinned = null;
            } else {
                pinned = whole ? message : null;
            }
        }
        return started;
    }

    /**
     * The message the next chunk goes to, with a budget: every {@link #OLDEST_EVERY}th the
     * oldest, otherwise the one with the fewest bytes left to request (the oldest among equals).
     *
     * @param pulls the messages waiting, oldest first (not empty)
     * @param chunksPosted the reads posted so far
     */
    static int nextIndex(List<InboundFrame> pulls, long chunksPosted) {
        if (chunksPosted % OLDEST_EVERY == OLDEST_EVERY - 1) {
            return 0;
        }
        int best = 0;
        long fewest = pulls.get(0).length - pulls.get(0).requested;
        for (int i = 1, n = pulls.size(); i < n; i++) {
            InboundFrame m = pulls.get(i);
            long left = m.length - m.requested;
            if (left < fewest) {
                best = i;
                fewest = left;
            }
        }
        return best;
    }

    /** A chunk of {@code message} arrived; once all have, the sender is released and the message delivered. */
    void onRead(InboundFrame message, long chunk) {
        Link link = message.link;
        if (link.peer.failure() != null) {
            abandon(message, chunk);
            return;
        }
        readsInFlight--;
        bytesInFlight -= chunk;
        message.pulled += chunk;
        if (message.pulled < message.length) {
            return;
        }
        message.complete = true;
        TransportEvents.rendezvous(config.provider(), link.peer.address(), link.id, message.length, config.rendezvousChunkBytes(), message.announcedNanos);
        if (!transport.sends.queueControl(link, FrameDescriptor.RNDV_DONE, message.cookie)) {
            transport.links.linkFailure(link, "out of control buffers");
            return;
        }
        ArrayDeque<InboundFrame> queue = link.heldBack.get(message.stream);
        while (queue != null && !queue.isEmpty() && queue.peek().complete) {
            transport.receives.deliver(queue.poll());
        }
        if (queue != null && queue.isEmpty()) {
            link.heldBack.remove(message.stream);
        }
    }

    /** A chunk of a pull that will not be delivered: the target goes once no read is left on it. */
    void abandon(InboundFrame message, long bytes) {
        detach(bytes);
        settle(message, bytes);
    }

    /**
     * A read of a torn-down peer that the provider has yet to end ({@link OperationTable#ORPHANED_READ}):
     * it no longer counts against the reads and the budget in flight, so that other peers' pulls
     * go on; its target stays until it ends ({@link #settle}).
     */
    void detach(long bytes) {
        readsInFlight--;
        bytesInFlight -= bytes;
    }

    /** A detached read of {@code message} ended: the target goes once no read is left on it. */
    void settle(InboundFrame message, long bytes) {
        message.pulled += bytes;
        if (message.pulled == message.requested && message.target != null) {
            message.target.release();
            message.target = null;
        }
    }
}
