package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;

import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.Endpoint;
import dev.ferry.fabric.Fi;
import dev.ferry.fabric.SharedReceiveContext;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.admission.DropLog;
import dev.ferry.transport.events.TransportEvents;

/**
 * Posts receive buffers and dispatches what arrives in them: checks each frame (who sent it,
 * on which link, whether it is well formed), takes its piggybacked credits, and hands an eager
 * message to the application, a rendezvous request to the {@link RendezvousPuller}, a release to
 * the {@link SendPump}, a reclaim or yield to the credits. A receive buffer is reposted once the
 * application released its message; an eager message waits behind an unfinished rendezvous of
 * its stream. Progress thread only, but for {@link #released}.
 */
final class ReceiveDispatcher {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /** The per-buffer message table: a power of two above the receive buffers usually posted. */
    private static final int EAGER_FRAMES = 1 << 14;

    private final FabricTransport transport;
    private final OperationTable ops;
    private final TransportConfig config;
    private final MessageHandler handler;
    private final FabricCounters counters;
    private final SharedReceiveContext srx;
    private final boolean sharedQueue;
    private final EndpointType type;
    private final int receiveBytes;
    /** Receives that found no free slot or a full queue: posted again on the next turn. */
    private final ArrayDeque<Object[]> repostRetry = new ArrayDeque<>();
    /**
     * The message of each receive buffer, at the buffer's identity hash, reused each time the
     * buffer brings an eager message: the buffer is reposted only once its last message was
     * released. A collision costs a new frame, not a wrong one.
     */
    private final InboundFrame[] eagerFrames = new InboundFrame[EAGER_FRAMES];
    /** The progress thread's clock, read once per batch of completions. */
    private long batchNanos;
    /**
     * Frames dropped (for a token that is not their link's, for no link, receives that brought
     * no frame at all): rate-limited lines with the reason.
     */
    private final DropLog forged;

    ReceiveDispatcher(FabricTransport transport) {
        this.transport = transport;
        this.ops = transport.ops;
        this.config = transport.config;
        this.handler = transport.handler;
        this.counters = transport.counters;
        this.srx = transport.srx;
        this.sharedQueue = transport.sharedQueue;
        this.type = transport.type;
        this.receiveBytes = transport.receiveBytes;
        this.forged = new DropLog(LOG, config.provider() + " endpoint", "frames");
    }

    /** A new batch of completions: its receives are stamped with this time. */
    void batchAt(long nanos) {
        batchNanos = nanos;
    }

    /** Whether receives wait to be posted again. */
    boolean retrying() {
        return !repostRetry.isEmpty();
    }

    /** Posts again the receives that found no room last time. */
    void retryReposts() {
        for (int i = repostRetry.size(); i > 0; i--) {
            Object[] pending = repostRetry.poll();
            postReceive((RegisteredBuffer) pending[0], (Link) pending[1]);
        }
    }

    /** Posts {@code buffer} for {@code link}, or to the shared receive context (any link, or null). */
    void postReceive(RegisteredBuffer buffer, Link link) {
        assert transport.holdsFabric();
        int slot = ops.take();
        Endpoint ep = link == null ? null : link.endpoint;
        if (slot < 0 || (srx == null && (ep == null || ep.isClosed()))) {
            if (slot >= 0) {
                ops.release(slot);
            }
            if (slot < 0) {
                repostRetry.add(new Object[] {buffer, link});
            } else {
                buffer.release();
            }
            return;
        }
        boolean posted = srx != null
                ? srx.recv(buffer.segment().address(), receiveBytes, buffer.descriptor(), ops.context(slot))
                : ep.recv(buffer.segment().address(), receiveBytes, buffer.descriptor(), Fi.ADDR_UNSPEC,
                        ops.context(slot));
        if (!posted) {
            ops.release(slot);
            repostRetry.add(new Object[] {buffer, link});
            return;
        }
        ops.posted(slot, OperationTable.RECV, buffer, sharedQueue ? null : link, 0);
    }

    /** {@code received} bytes arrived in {@code buffer} (on {@code known}, or the shared queue, from {@code source}). */
    void onReceive(RegisteredBuffer buffer, Link known, long received, long source) {
        MemorySegment frame = buffer.segment();
        boolean truncated = received < FrameDescriptor.HEADER;
        if (truncated) {
            counters.truncatedFrames.increment();
        }
        String problem = FrameDescriptor.validate(frame, received, config.eagerThreshold(), config.maxMessageSize());
        int id = truncated ? -1 : FrameDescriptor.link(frame);
        LinkTable links = transport.links;
        Link link = known != null ? known : links.byId(id);
        if (source != Fi.ADDR_UNSPEC && (link == null || link.address != source)) {
            // A shared endpoint: the sender is who the provider says, whatever the frame claims.
            Link sender = links.from(source);
            if (problem == null) {
                problem = "frame names link " + id + " but came from " + (sender == null ? "an unknown peer" : sender);
            }
            link = sender;
        }
        if (problem == null && (link == null || id != link.id)) {
            problem = "frame names link " + id;
        }
        if (link == null) {
            // A receive shorter than a header on a shared queue names no link: a peer's garbage,
            // or an empty completion of a provider that lost track of its entries (LinkTeardown).
            // The buffer is the queue's again. Each such completion is one the provider made, and
            // a turn handles one batch of completions before it pumps sends and pulls: a flood of
            // them delays the others' traffic by a batch at most, it does not starve it.
            forged.drop(truncated ? "truncated" : "no link", truncated ? "a receive of " + received
                    + " bytes, too short for a frame header" : "a frame for no link: " + problem);
            postShared(buffer);
            return;
        }
        if (received >= FrameDescriptor.HEADER && FrameDescriptor.token(frame) != link.token) {
            // Not from the link's peer (it alone was told the token): never delivered, and never
            // held against the link, whose peer did nothing wrong.
            counters.forgedFrames.increment();
            forged.drop("token", "a frame naming " + link + " without its token");
            if (sharedQueue) {
                postShared(buffer);
            } else if (link.peer.failure() == null) {
                postReceive(buffer, link);
            } else {
                buffer.release();
            }
            return;
        }
        if (link.peer.failure() != null) {
            recycle(buffer, link);
            return;
        }
        if (problem != null) {
            links.linkFailure(link, "bad frame: " + problem);
            recycle(buffer, link);
            return;
        }
        byte kind = FrameDescriptor.type(frame);
        link.credits.arrived(kind == FrameDescriptor.CREDIT);
        link.credits.returned(FrameDescriptor.credits(frame));
        transport.sends.activate(link);
        int stream = FrameDescriptor.stream(frame);
        if (kind == FrameDescriptor.EAGER || kind == FrameDescriptor.RNDV_REQ || kind == FrameDescriptor.RNDV_SHARED) {
            link.lastArrivalNanos = batchNanos; // messages, not control frames, make a link busy
            link.heard = true;
        }
        switch (kind) {
            case FrameDescriptor.EAGER -> {
                long released = FrameDescriptor.cookie(frame); // a release riding along (PendingReleases)
                if (released != 0 && !transport.sends.outcomes.onRendezvousDone(link, released)) {
                    recycle(buffer, link);
                    links.linkFailure(link, "rendezvous release for unknown cookie " + released);
                    return;
                }
                deliverInOrder(eagerFrame(buffer).eager(link, stream, FrameDescriptor.length(frame)));
            }
            case FrameDescriptor.RNDV_REQ -> {
                InboundFrame message = new InboundFrame(link, stream, null, false, FrameDescriptor.length(frame), null);
                message.remoteAddress = FrameDescriptor.remoteAddress(frame);
                message.remoteKey = FrameDescriptor.remoteKey(frame);
                message.cookie = FrameDescriptor.cookie(frame);
                message.announcedNanos = TransportEvents.rendezvousStart();
                link.heldBack.computeIfAbsent(stream, s -> new ArrayDeque<>()).add(message);
                transport.pulls.add(message);
                recycle(buffer, link);
            }
            case FrameDescriptor.RNDV_SHARED -> shared(buffer, link, stream, frame);
            case FrameDescriptor.RELEASES -> {
                int n = (int) FrameDescriptor.length(frame);
                for (int i = 0; i < n; i++) {
                    long cookie = FrameDescriptor.released(frame, i);
                    if (!transport.sends.outcomes.onRendezvousDone(link, cookie)) {
                        links.linkFailure(link, "release of unknown cookie " + cookie);
                        break;
                    }
                }
                recycle(buffer, link);
            }
            case FrameDescriptor.RNDV_DONE -> {
                long cookie = FrameDescriptor.cookie(frame);
                recycle(buffer, link);
                if (!transport.sends.outcomes.onRendezvousDone(link, cookie)) {
                    links.linkFailure(link, "rendezvous release for unknown cookie " + cookie);
                }
            }
            case FrameDescriptor.RECLAIM -> {
                int given = link.credits.yieldUpTo((int) FrameDescriptor.cookie(frame), CreditBalancer.CREDIT_FLOOR);
                recycle(buffer, link);
                if (!transport.sends.queueControl(link, FrameDescriptor.YIELD, given)) {
                    links.linkFailure(link, "out of control buffers");
                }
            }
            case FrameDescriptor.YIELD -> {
                int given = (int) FrameDescriptor.cookie(frame);
                recycle(buffer, link);
                if (!transport.credits.onYield(link, given)) {
                    links.linkFailure(link, "gave back " + given + " credits unasked or beyond its grant");
                }
            }
            default -> recycle(buffer, link); // CREDIT: the header did the work
        }
    }

    /**
     * A message by reference: delivered as a view of the sender's slab, in its stream's order
     * (behind rendezvous messages still being pulled). It keeps the receive buffer its frame came
     * in until it is released, so that it holds a credit as an eager message does: a receiver
     * that holds messages slows their sender down instead of filling the sender's send pool. A
     * peer that names memory it does not have, or that this side cannot map, fails the link.
     */
    private void shared(RegisteredBuffer buffer, Link link, int stream, MemorySegment frame) {
        PeerMemory memory = link.peer.memory;
        long length = FrameDescriptor.length(frame);
        long offset = FrameDescriptor.remoteAddress(frame);
        PeerMemory.Slab slab = memory == null ? null
                : memory.acquire(FrameDescriptor.sharedSlab(frame), FrameDescriptor.sharedFd(frame), offset, length);
        if (slab == null) {
            recycle(buffer, link);
            transport.links.linkFailure(link, memory == null ? "a message by reference from a peer whose memory is not mapped"
                    : "a message by reference: " + memory.refusal());
            return;
        }
        deliverInOrder(eagerFrame(buffer).byReference(link, stream, slab.view(offset, length), FrameDescriptor.cookie(frame),
                slab));
    }

    /** Delivers a complete message now, or behind its stream's messages still being pulled. */
    private void deliverInOrder(InboundFrame message) {
        Link link = message.link;
        ArrayDeque<InboundFrame> queue = link.heldBack.isEmpty() ? null : link.heldBack.get(message.stream);
        if (queue != null) {
            queue.add(message);
        } else {
            deliver(message);
        }
    }

    /** A receive completed in error (its link closed under it, or the provider failed it). */
    void onReceiveFailed(RegisteredBuffer buffer, Link link, String error) {
        assert transport.holdsFabric();
        if (sharedQueue && !transport.isClosed()) {
            // A link closed in the middle of a message, or a frame longer than the buffer
            // (FI_ETRUNC on shm): the buffer is the shared queue's again, which counts it as posted.
            postShared(buffer);
            return;
        }
        buffer.release();
        if (link != null && link.peer.failure() == null && !transport.isClosed()) {
            transport.links.linkFailure(link, "receive failed: " + error);
        }
    }

    /** Reposts a buffer the transport consumed itself, returning its credit. */
    void recycle(RegisteredBuffer buffer, Link link) {
        if (sharedQueue) {
            postShared(buffer);
            if (link.peer.failure() == null) {
                link.credits.reposted();
            }
            return;
        }
        if (link.peer.failure() != null) {
            buffer.release();
            return;
        }
        postReceive(buffer, link);
        link.credits.reposted();
    }

    /** Posts {@code buffer} to the queue all links share, or frees it where there is none. */
    void postShared(RegisteredBuffer buffer) {
        if (srx != null) {
            postReceive(buffer, null);
            return;
        }
        if (type != EndpointType.RDM) {
            buffer.release();
            return;
        }
        // Any link object serves to name the shared endpoint.
        Link any = transport.links.any();
        if (any == null || any.endpoint == null) {
            buffer.release();
            return;
        }
        postReceive(buffer, any);
    }

    private InboundFrame eagerFrame(RegisteredBuffer buffer) {
        int i = System.identityHashCode(buffer) & (EAGER_FRAMES - 1);
        InboundFrame frame = eagerFrames[i];
        if (frame == null || frame.buffer != buffer) {
            frame = new InboundFrame(buffer);
            eagerFrames[i] = frame;
        }
        return frame;
    }

    /** Hands {@code message} to the application. */
    void deliver(InboundFrame message) {
        counters.messagesReceived.increment();
        counters.bytesReceived.add(message.length);
        counters.held.incrementAndGet();
        try {
            handler.onMessage(message.link.peer, new ReceivedMessage(message));
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "message handler threw", e);
        }
    }

    /** An application released {@code message}: any thread. */
    void released(InboundFrame message) {
        counters.held.decrementAndGet();
        if (transport.isClosed()) {
            return; // the memory went with the transport
        }
        if (message.eager || message.shared != null) {
            counters.reposts.increment();
            if (transport.holdsFabric()) {
                repost(message); // released inside the handler: the credit goes back at once
            } else if (!transport.callers.release(message)) {
                transport.proxy.release(message);
            }
        } else {
            message.target.release();
        }
    }

    /**
     * The application released an eager message: its buffer goes back, and with it a credit. A
     * message by reference goes back to its sender instead (RNDV_DONE, unless the link failed).
     */
    void repost(InboundFrame message) {
        if (message.shared != null) {
            Link link = message.link;
            link.peer.memory.release(message.shared);
            message.shared = null;
            if (link.peer.failure() == null && !transport.sends.oweRelease(link, message.cookie)) {
                transport.links.linkFailure(link, "out of control buffers");
            }
        }
        recycle(message.buffer, message.link);
        transport.sends.activate(message.link);
    }

    /** Teardown: frees what {@code link} held back behind an unfinished rendezvous. */
    void dropHeld(Link link) {
        for (var queue : link.heldBack.values()) {
            for (InboundFrame message : queue) {
                if (message.shared != null) {
                    link.peer.memory.release(message.shared);
                    message.shared = null;
                }
                if (message.buffer != null) { // eager, or by reference: a receive buffer
                    if (sharedQueue) {
                        postShared(message.buffer); // the shared queue counts it as posted
                    } else {
                        message.buffer.release();
                    }
                } else if (message.target != null && message.pulled == message.requested) {
                    message.target.release();
                    message.target = null;
                }
            }
        }
        link.heldBack.clear();
    }
}
