package dev.ferry.transport.fabric;

import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * What becomes of a message once {@link SendPump} posted it: completed (eager), released by its
 * peer (rendezvous, by reference), failed in error, dropped with its endpoint, orphaned by a
 * teardown on a shared endpoint; and the failure of a send that never went. Each gives the
 * window back, settles the future and returns the buffer exactly once. Progress thread only.
 */
final class SendOutcomes {

    private final FabricTransport transport;
    private final SendPump pump;
    private final AwaitedReleases awaited;
    private final SendWindow window;
    private final RendezvousKeys rendezvousKeys;
    private final FabricCounters counters;

    SendOutcomes(FabricTransport transport, SendPump pump, AwaitedReleases awaited) {
        this.transport = transport;
        this.pump = pump;
        this.awaited = awaited;
        this.window = transport.window;
        this.rendezvousKeys = transport.rendezvousKeys;
        this.counters = transport.counters;
    }

    /**
     * The send of a message completed: an eager one is done; a rendezvous waits for the release. A
     * message by reference is delivered (its future settles and its window comes back, as an eager
     * one's, unless its release came first and did that); its buffer goes back once the release
     * has come too.
     */
    void onMessageSent(OutboundFrame frame) {
        assert transport.holdsFabric();
        if (frame.type == FrameDescriptor.EAGER) {
            completeSend(frame);
        } else if (frame.type == FrameDescriptor.RNDV_SHARED && !frame.abandoned) {
            awaited.delivered(frame);
            awaited.sendEnded(frame);
        }
    }

    /**
     * The peer released the payload of rendezvous {@code cookie} on {@code link}: the send is
     * done. False if no such send was made on that link (the caller fails the link).
     */
    boolean onRendezvousDone(Link link, long cookie) {
        assert transport.holdsFabric();
        OutboundFrame sent = awaited.released(link, cookie);
        if (sent == null) {
            return false;
        }
        if (sent.type == FrameDescriptor.RNDV_SHARED) {
            // The release proves delivery, also when it comes before the send's completion.
            awaited.delivered(sent);
            awaited.returned(sent);
            return true;
        }
        rendezvousKeys.revoke(cookie);
        completeSend(sent);
        return true;
    }

    /**
     * The send completed: the message is in the peer's receive buffer (eager) or was pulled
     * (rendezvous). It stays a success even if the peer failed since: it was delivered.
     */
    private void completeSend(OutboundFrame frame) {
        window.release(frame.link, frame.length);
        pump.activate(frame.link);
        counters.messagesSent.increment();
        counters.bytesSent.add(frame.length);
        frame.finish(null);
    }

    /**
     * A message's send completed in error. A rendezvous request no longer waiting for its release
     * was settled already (released by its peer, or failed with it at a teardown that kept the
     * endpoint open for reads, {@link LinkTeardown}): its window and buffer are not given back twice.
     */
    void onMessageFailed(OutboundFrame frame, Link link, TransportException cause) {
        assert transport.holdsFabric();
        boolean pending = awaited.forget(frame.cookie);
        if (frame.type == FrameDescriptor.RNDV_SHARED) {
            if (frame.abandoned || frame.returned) {
                awaited.sendEnded(frame); // a teardown's grace frees it, or the release came: it goes now
                return;
            }
            // Failed in error, but the peer may have the frame: its buffer is lent, not reused at once.
            frame.sendEnded = true;
            awaited.abandon(frame, cause, System.nanoTime());
            return;
        } else if (!pending && frame.type == FrameDescriptor.RNDV_REQ) {
            return;
        }
        rendezvousKeys.revoke(frame.cookie);
        window.release(link, frame.length);
        frame.free();
        failFuture(frame, cause);
    }

    /** A message's send was dropped with its endpoint: an eager one fails (a rendezvous with its peer). */
    void onMessageDropped(OutboundFrame frame, Link link, Throwable cause) {
        assert transport.holdsFabric();
        if (frame.type == FrameDescriptor.EAGER) {
            window.release(link, frame.length);
            frame.free();
            failFuture(frame, cause);
        } else if (frame.type == FrameDescriptor.RNDV_SHARED && !frame.abandoned) {
            awaited.sendEnded(frame); // released already: it goes; else the teardown lends it
        }
    }

    /**
     * Teardown on a shared endpoint: an eager send the provider still has fails now (its window
     * back, its future settled); its buffer waits for the send's completion
     * ({@link OperationTable#ORPHANED_SEND}, {@link #onOrphanEnded}). A provider need not ever
     * complete a send to a peer that is gone (shm does not, once the peer's region is unmapped).
     */
    void onMessageOrphaned(OutboundFrame frame, Link link, Throwable cause) {
        assert transport.holdsFabric();
        if (frame.type == FrameDescriptor.EAGER) {
            window.release(link, frame.length);
            frame.settleEarly(asFailure(cause));
        }
    }

    /** An orphaned send completed, in success or error, or was dropped at the shutdown: its buffer goes back. */
    void onOrphanEnded(OutboundFrame frame) {
        assert transport.holdsFabric();
        if (frame.type == FrameDescriptor.EAGER) {
            frame.finish(null);
        } else if (frame.type == FrameDescriptor.RNDV_SHARED && !frame.abandoned) {
            awaited.sendEnded(frame);
        }
    }

    /** Teardown: fails the sends to {@code peer} it had not released ({@link AwaitedReleases#failPeer}). */
    void failRendezvous(FabricPeer peer, Throwable cause) {
        assert transport.holdsFabric();
        awaited.failPeer(peer, cause);
    }

    void failSend(OutboundFrame frame, Throwable cause) {
        rendezvousKeys.revoke(frame.cookie);
        frame.free();
        failFuture(frame, cause);
    }

    static void failFuture(OutboundFrame frame, Throwable cause) {
        frame.finish(asFailure(cause));
    }

    /** {@code cause} as a send's failure: itself if a {@link TransportException}, else wrapped with its reason. */
    static TransportException asFailure(Throwable cause) {
        return cause instanceof TransportException t ? t
                : new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), cause.getMessage(), cause);
    }
}
