package dev.ferry.transport.fabric;

import java.util.ArrayDeque;

import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.events.TransportEvents;

/**
 * Pulls the payloads of rendezvous messages with RDMA reads, in chunks of
 * {@code rendezvousChunkBytes}, at most {@link #MAX_READS} reads in flight, each into a buffer of
 * the rendezvous pool. A message pulled whole is released to its sender (RNDV_DONE) and delivered
 * in its stream's order, behind nothing and before what arrived after it. The rendezvous pool
 * paces this receiver's incast: where it has no room, pulls wait. With a pull budget
 * ({@link TransportConfig#pullBudgetBytes()}) the receiver also schedules the bytes on the wire:
 * its reads in flight never exceed the budget (one read always may), a read is at most half the
 * budget, and the chunks go round-robin over the messages waiting, so every sender is served in
 * turn and none starves. Progress thread only.
 */
final class RendezvousPuller {

    /** Reads in flight at once, across all peers. */
    private static final int MAX_READS = 16;

    private final FabricTransport transport;
    private final OperationTable ops;
    private final RegisteredAllocator allocator;
    private final TransportConfig config;
    /** Messages with chunks still to request, in arrival order. */
    private final ArrayDeque<InboundFrame> pulls = new ArrayDeque<>();
    private int readsInFlight;
    /** 0: no budget. */
    private final long budget;
    private final long chunkBytes;
    private long bytesInFlight;
    /** The most bytes of reads in flight at once; written by the progress thread, read by tests. */
    private volatile long peakBytesInFlight;

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

    /** Whether reads are in flight or waiting: a completion is due without any peer's doing. */
    boolean busy() {
        return readsInFlight > 0 || !pulls.isEmpty();
    }

    /** Starts the reads there is room for; the number started. */
    int pull() {
        assert transport.holdsFabric();
        int started = 0;
        while (!pulls.isEmpty() && readsInFlight < MAX_READS) {
            InboundFrame message = pulls.peek();
            Link link = message.link;
            if (link.peer.failure() != null) {
                pulls.poll();
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
            long chunk = Math.min(chunkBytes, message.length - message.requested);
            if (budget > 0 && readsInFlight > 0 && bytesInFlight + chunk > budget) {
                break; // the budget is on the wire: the next read goes when one completes
            }
            int slot = ops.take();
            if (slot < 0) {
                break;
            }
            if (!link.endpoint.read(message.target.segment().address() + message.requested, chunk,
                    message.target.descriptor(), link.address, message.remoteAddress + message.requested,
                    message.remoteKey, ops.context(slot))) {
                ops.release(slot);
                break;
            }
            ops.posted(slot, OperationTable.READ, message, link, chunk);
            message.requested += chunk;
            readsInFlight++;
            bytesInFlight += chunk;
            if (bytesInFlight > peakBytesInFlight) {
                peakBytesInFlight = bytesInFlight;
            }
            started++;
            if (link.peer.doorbell != null) {
                link.peer.doorbell.ring(); // a provider may need the target to progress the read
            }
            if (message.requested == message.length) {
                pulls.poll();
            } else if (budget > 0 && pulls.size() > 1) {
                pulls.addLast(pulls.poll()); // round-robin: the next message's turn
            }
        }
        return started;
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
        readsInFlight--;
        bytesInFlight -= bytes;
        message.pulled += bytes;
        if (message.pulled == message.requested && message.target != null) {
            message.target.release();
            message.target = null;
        }
    }
}
