package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;

import dev.ferry.fabric.FabricException;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.events.TransportEvents;
import dev.ferry.transport.TransportException.Reason;

/**
 * Posts what links have to send, in order, as credits and the send window allow: control
 * frames first (rendezvous releases, credit reclaims and yields), then messages (eager, the
 * request of a rendezvous, or a reference to a shared slab), then a credit return where one is
 * due and nothing carried it. An eager frame carries a release this side owes
 * ({@link PendingReleases}). Owns the small buffers of control frames and the sends whose
 * payload the peer has not released yet ({@link AwaitedReleases}); what becomes of a message
 * once posted is {@link SendOutcomes}'. Progress thread only.
 */
final class SendPump {

    /** Buffers for control frames (credit returns, releases, reclaims): far above what is ever in flight. */
    private static final int CONTROL_BUFFERS = 2048;

    private final FabricTransport transport;
    private final OperationTable ops;
    private final SendWindow window;
    private final RendezvousKeys rendezvousKeys;
    private final FabricCounters counters;
    /** Links with something to post, each at most once. */
    private final ArrayDeque<Link> active = new ArrayDeque<>();
    private final ArrayDeque<RegisteredBuffer> controlBuffers = new ArrayDeque<>();
    /** Rendezvous sends and messages by reference, until the peer releases them (or fails). */
    final AwaitedReleases awaited;
    /** What becomes of the messages once posted. */
    final SendOutcomes outcomes;
    private long nextCookie = 1;
    /** Test hook: sends still to refuse as a provider would ({@link #refuseForTest}). */
    private volatile int refusals;

    SendPump(FabricTransport transport, RegisteredAllocator allocator) {
        this.transport = transport;
        this.ops = transport.ops;
        this.window = transport.window;
        this.rendezvousKeys = transport.rendezvousKeys;
        this.counters = transport.counters;
        this.awaited = new AwaitedReleases(this, window, rendezvousKeys, counters);
        this.outcomes = new SendOutcomes(transport, this, awaited);
        for (int i = 0; i < CONTROL_BUFFERS; i++) {
            controlBuffers.add(allocator.tryAllocate(PoolKind.SEND, FrameDescriptor.HEADER + 8 * PendingReleases.CAPACITY));
        }
    }

    /** Test hook: the next {@code n} posts of a message fail as the provider's outright refusal would. */
    void refuseForTest(int n) {
        refusals = n;
    }

    /** A send handed over by the application: queued on its link (or the link it retired to). */
    void enqueue(OutboundFrame frame) {
        assert transport.holdsFabric();
        Link link = frame.link;
        while (link.retiredTo != null) {
            link.waiting.decrementAndGet();
            link = link.retiredTo;
            link.waiting.incrementAndGet();
            frame.link = link;
        }
        if (link.peer.failure() != null) {
            link.waiting.decrementAndGet();
            outcomes.failSend(frame, link.peer.failure());
            return;
        }
        link.queue.add(frame);
        activate(link);
    }

    /** {@code link} may have something to post: it is pumped on the next turn. */
    void activate(Link link) {
        if (!link.active) {
            link.active = true;
            active.add(link);
        }
    }

    /**
     * Queues a control frame on {@code link}; false if no control buffer is left (the caller
     * fails the link: that many frames in flight means the peer stopped returning credits).
     */
    boolean queueControl(Link link, byte type, long cookie) {
        RegisteredBuffer b = controlBuffers.poll();
        if (b == null) {
            return false;
        }
        link.control.add(OutboundFrame.control(link.peer, b, type, cookie));
        activate(link);
        return true;
    }

    /**
     * Owes {@code link}'s peer the release of its message {@code cookie} by reference: it rides the
     * next eager frame ({@link PendingReleases}), or goes on a frame of its own when too many are
     * owed; false if no control buffer was left (the caller fails the link).
     */
    boolean oweRelease(Link link, long cookie) {
        if (link.releases.add(cookie)) {
            return true;
        }
        return flushReleases(link) && link.releases.add(cookie);
    }

    /** Sends the releases {@code link} owes, in one RELEASES frame (the credit review, or too many owed). */
    boolean flushReleases(Link link) {
        // A RELEASES frame must fit the peer's receive buffers (HEADER + its eager threshold at least).
        int perFrame = Math.min(PendingReleases.CAPACITY, link.peer.eagerLimit / 8);
        while (link.releases.size() > 0) {
            RegisteredBuffer b = controlBuffers.poll();
            if (b == null) {
                return false;
            }
            if (perFrame == 0) {
                link.control.add(OutboundFrame.control(link.peer, b, FrameDescriptor.RNDV_DONE, link.releases.peek()));
                link.releases.remove();
            } else {
                int n = link.releases.drainTo(b.segment(), perFrame);
                counters.releaseFramesSent.increment();
                link.control.add(OutboundFrame.control(link.peer, b, FrameDescriptor.RELEASES, n));
            }
        }
        activate(link);
        return true;
    }

    /**
     * Whether a link still has something to post after the last pump (waiting for credits, the
     * window or an operation slot): then completions must be reaped soon. Token holder.
     */
    boolean blocked() {
        return !active.isEmpty();
    }

    /** Pumps every active link once; the operations posted. */
    int pump() {
        assert transport.holdsFabric();
        int work = 0;
        for (int i = active.size(); i > 0; i--) {
            Link link = active.poll();
            link.active = false;
            work += pump(link);
            // A failed peer's link posts nothing more: kept active, it would keep the loop awake.
            if (link.peer.failure() == null
                    && (!link.queue.isEmpty() || !link.control.isEmpty() || link.credits.shouldReturn())) {
                activate(link);
            }
        }
        return work;
    }

    private int pump(Link link) {
        if (!link.ready || link.peer.failure() != null) {
            return 0;
        }
        int posted = 0;
        // Rendezvous releases count as messages: they may not take the reserve kept for credit returns.
        while (!link.control.isEmpty() && link.credits.canSendMessage()) {
            OutboundFrame frame = link.control.peek();
            if (!postControl(link, frame.buffer, frame.type, frame.cookie)) {
                return posted;
            }
            link.control.poll();
            posted++;
        }
        while (!link.queue.isEmpty()) {
            OutboundFrame frame = link.queue.peek();
            if (!link.credits.canSendMessage()) {
                if (!link.creditStalled) {
                    link.creditStalled = true;
                    counters.creditStalls.increment();
                    TransportEvents.creditStall(transport.config.provider(), link.peer.address(), link.id, link.queue.size(), link.inFlight);
                }
                break;
            }
            link.creditStalled = false;
            if (!frame.admitted) {
                if (!window.tryAcquire(link, frame.length)) {
                    if (!link.windowStalled) {
                        link.windowStalled = true;
                        counters.windowStalls.increment();
                        TransportEvents.windowStall(transport.config.provider(), link.peer.address(), link.id, frame.length, link.inFlight, link.rendezvousInFlight);
                    }
                    break;
                }
                frame.admitted = true;
            }
            link.windowStalled = false;
            if (!postMessage(link, frame)) {
                break;
            }
            link.queue.poll();
            link.waiting.decrementAndGet();
            posted++;
        }
        if (link.credits.shouldReturn() && link.credits.canSendControl()) {
            RegisteredBuffer b = controlBuffers.poll();
            if (b != null) {
                if (postControl(link, b, FrameDescriptor.CREDIT, 0)) {
                    counters.creditFramesSent.increment();
                    posted++;
                } else {
                    controlBuffers.add(b);
                }
            }
        }
        if (posted > 0 && link.peer.doorbell != null) {
            link.peer.doorbell.ring();
        }
        return posted;
    }

    private boolean postMessage(Link link, OutboundFrame frame) {
        int slot = ops.take();
        if (slot < 0) {
            return false;
        }
        int fd = byReference(link, frame);
        boolean eager = fd < 0 && frame.eager(link.peer.eagerLimit);
        int credits = link.credits.toReturn();
        MemorySegment whole = frame.buffer.segment();
        boolean ok;
        if (fd >= 0) {
            if (frame.cookie == 0) {
                frame.cookie = nextCookie++;
            } else {
                rendezvousKeys.revoke(frame.cookie); // an earlier attempt (EAGAIN) went as a rendezvous
            }
            FrameDescriptor.header(whole, FrameDescriptor.RNDV_SHARED, credits, link.remoteId, link.remoteToken, frame.stream,
                    frame.length, frame.cookie);
            FrameDescriptor.shared(whole, frame.buffer.slabOffset() + FrameDescriptor.PAYLOAD_OFFSET,
                    frame.buffer.slabIndex(), fd);
            ok = send(link, whole.address(), FrameDescriptor.RNDV_REQ_BYTES, frame.buffer.descriptor(), slot, true);
        } else if (eager) {
            FrameDescriptor.header(whole, FrameDescriptor.EAGER_OFFSET, FrameDescriptor.EAGER, credits, link.remoteId,
                    link.remoteToken, frame.stream, frame.length, link.releases.peek());
            ok = send(link, whole.address() + FrameDescriptor.EAGER_OFFSET, FrameDescriptor.HEADER + frame.length,
                    frame.buffer.descriptor(), slot, true);
        } else {
            if (frame.cookie == 0) {
                frame.cookie = nextCookie++; // once: a send retried after EAGAIN keeps its key
            }
            FrameDescriptor.header(whole, FrameDescriptor.RNDV_REQ, credits, link.remoteId, link.remoteToken, frame.stream,
                    frame.length, frame.cookie);
            try {
                rendezvousKeys.advertise(frame.cookie, whole, frame.length);
            } catch (FabricException e) {
                ops.release(slot);
                if (frame.future == null && frame.onDone == null) {
                    // Sent and forgotten: its failure may show only as the peer's, as promised
                    // (Peer.sendAndForget), not as a gap in its stream that nobody hears of.
                    transport.links.linkFailure(link, "cannot register a rendezvous payload: " + e.getMessage());
                    return false;
                }
                window.release(link, frame.length);
                outcomes.failSend(frame, new TransportException(Reason.LIMIT_REACHED, "cannot register a rendezvous payload: " + e.getMessage(), e));
                return true; // consumed: this message failed, the ones behind it may go
            }
            ok = send(link, whole.address(), FrameDescriptor.RNDV_REQ_BYTES, frame.buffer.descriptor(), slot, true);
        }
        if (!ok) {
            ops.release(slot);
            return false;
        }
        link.credits.spent(credits);
        if (eager && link.releases.size() > 0) {
            link.releases.remove(); // it rode this frame
        }
        frame.type = fd >= 0 ? FrameDescriptor.RNDV_SHARED : eager ? FrameDescriptor.EAGER : FrameDescriptor.RNDV_REQ;
        ops.posted(slot, OperationTable.SEND_MESSAGE, frame, link, 0);
        if (eager) {
            counters.eagerSent.increment();
        } else {
            counters.rendezvousSent.increment();
            if (fd >= 0) {
                counters.sharedSent.increment();
            }
            awaited.await(frame);
        }
        return true;
    }

    /**
     * The descriptor of the shared slab {@code frame} goes by reference from, or -1 (it goes
     * through the provider): the peer maps this side's slabs, the message is large enough
     * ({@link dev.ferry.transport.TransportConfig#sharedSendBytes}) and lies in a shared slab.
     */
    private int byReference(Link link, OutboundFrame frame) {
        long threshold = transport.config.sharedSendBytes();
        if (threshold == 0 || !link.peer.mapsOurs || frame.length < threshold) {
            return -1;
        }
        return frame.buffer.sharedFd();
    }

    private boolean postControl(Link link, RegisteredBuffer buffer, byte frameType, long cookie) {
        int slot = ops.take();
        if (slot < 0) {
            return false;
        }
        int credits = link.credits.toReturn();
        MemorySegment header = buffer.segment();
        // RELEASES: the count goes in the length, the cookies follow the header (written when queued).
        boolean releases = frameType == FrameDescriptor.RELEASES;
        FrameDescriptor.header(header, frameType, credits, link.remoteId, link.remoteToken, 0, releases ? cookie : 0,
                releases ? 0 : cookie);
        long bytes = FrameDescriptor.HEADER + (releases ? 8 * cookie : 0);
        if (!send(link, header.address(), bytes, buffer.descriptor(), slot, false)) {
            ops.release(slot);
            return false;
        }
        link.credits.spent(credits);
        ops.posted(slot, OperationTable.SEND_CONTROL, buffer, link, 0);
        return true;
    }

    /**
     * Posts a send on {@code link} with operation {@code slot} ({@code message}: a message's, not a
     * control frame's): false if the link has failed, or if the provider's queue is
     * full (the frame stays at the head of its queue, and goes on a later pump), or if the
     * provider refused it outright, which fails the link with the provider's reason (its queued
     * frames with it) instead of the transport or the calling thread.
     */
    private boolean send(Link link, long address, long length, long descriptor, int slot, boolean message) {
        if (link.peer.failure() != null) {
            return false; // failed in this pump (a refusal below): its endpoint may be closed already
        }
        try {
            if (message && refusals > 0) {
                refusals--;
                throw new FabricException("fi_send refused (test)");
            }
            return link.endpoint.send(address, length, descriptor, link.address, ops.context(slot));
        } catch (FabricException e) {
            transport.links.linkFailure(link, "send refused by the provider: " + e.getMessage());
            return false;
        }
    }

    /**
     * Fault injection: posts {@code length} raw bytes of {@code buffer} on {@code link} as a
     * frame; false if the endpoint is busy (the caller retries).
     */
    boolean postRaw(Link link, RegisteredBuffer buffer, int length) {
        int slot = ops.take();
        if (slot >= 0 && link.endpoint.send(buffer.segment().address(), length, buffer.descriptor(), link.address,
                ops.context(slot))) {
            link.credits.spent(0);
            ops.posted(slot, OperationTable.SEND_CONTROL, buffer, link, 0);
            return true;
        }
        if (slot >= 0) {
            ops.release(slot);
        }
        return false;
    }

    void onControlSent(RegisteredBuffer buffer) {
        controlBuffers.add(buffer);
    }

    /** Teardown: fails what waits on {@code link} and takes back its control frames' buffers. */
    void failQueued(Link link, Throwable cause) {
        while (!link.queue.isEmpty()) {
            OutboundFrame frame = link.queue.poll();
            link.waiting.decrementAndGet();
            if (frame.admitted) {
                window.release(link, frame.length);
            }
            outcomes.failSend(frame, cause);
        }
        while (!link.control.isEmpty()) {
            controlBuffers.add(link.control.poll().buffer);
        }
    }
}
