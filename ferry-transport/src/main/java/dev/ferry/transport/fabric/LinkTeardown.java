package dev.ferry.transport.fabric;

import dev.ferry.fabric.EndpointType;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;
import dev.ferry.transport.events.TransportEvents;

/**
 * Tears a failed or closed peer's links down: fails what waits to be sent on them and the
 * rendezvous sends the peer had not released, frees the messages held back, the reserved
 * receive buffers and, where nothing will complete any more, the operations in flight; removes
 * the peer's address and doorbell, and tells the application. Token holder only.
 */
final class LinkTeardown {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");

    private final FabricTransport transport;
    private final LinkTable links;
    private final TransportConfig config;
    private final EndpointType type;

    LinkTeardown(FabricTransport transport, LinkTable links) {
        this.transport = transport;
        this.links = links;
        this.config = transport.config;
        this.type = transport.type;
    }

    /** {@code link} broke (a bad frame, a failed operation): its peer goes with it. */
    void linkFailure(Link link, String reason) {
        if (link.peer.failure() != null) {
            return;
        }
        transport.counters.linkFailures.increment();
        TransportEvents.linkFailed(config.provider(), link.peer.address(), link.id, reason);
        LOG.log(System.Logger.Level.WARNING, "closing " + link + ": " + reason);
        teardown(link.peer, new TransportException(Reason.PEER_FAILED, link + " closed: " + reason), true);
    }

    /** Fails a peer, its sends and its links; tells the application if {@code notify}. */
    void teardown(FabricPeer peer, Throwable cause, boolean notify) {
        assert transport.holdsFabric();
        boolean first = peer.fail(cause);
        for (Link link : peer.links) {
            if (link.ready) {
                links.closed(link);
            }
            transport.credits.withdraw(link);
            transport.sends.failQueued(link, cause);
            transport.receives.dropHeld(link);
            if (link.reserved != null) {
                for (RegisteredBuffer b : link.reserved) {
                    if (b != null) {
                        b.release();
                    }
                }
                link.reserved = null;
            }
            if (type == EndpointType.MSG && link.endpoint != null && !link.endpoint.isClosed()) {
                link.endpoint.close();
                // Nothing completes on a closed endpoint: free what it still held.
                transport.ops.dropAll(link, (kind, target, of, bytes) -> dropped(kind, target, of, bytes, cause));
            } else if (type != EndpointType.MSG && transport.isClosed()) {
                // The shutdown: the shared endpoint closes next and nobody reads its completions,
                // so the sends still in flight on it fail now rather than never.
                transport.ops.dropAll(link, (kind, target, of, bytes) -> dropped(kind, target, of, bytes, cause));
            }
        }
        transport.sends.failRendezvous(peer, cause);
        if (peer.fabricConnection != null) {
            // Each incarnation of a peer inserts its address again: without the removal a peer
            // that reconnects fills the address vector (256 entries) and is refused from then on.
            peer.fabricConnection.close();
            peer.fabricConnection = null;
        }
        if (peer.doorbell != null) {
            peer.doorbell.close();
            peer.doorbell = null;
        }
        transport.peers.remove(peer.address(), peer);
        peer.control.close();
        ControlPlane.closeQuietly(peer.shmRegion);
        if (first && notify && !transport.isClosed()) {
            try {
                transport.handler.onPeerClosed(peer, cause);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "onPeerClosed threw", e);
            }
        }
    }

    private void dropped(byte kind, Object target, Link link, long bytes, Throwable cause) {
        switch (kind) {
            case OperationTable.RECV -> ((RegisteredBuffer) target).release();
            case OperationTable.SEND_MESSAGE -> transport.sends.onMessageDropped((OutboundFrame) target, link, cause);
            case OperationTable.SEND_CONTROL -> transport.sends.onControlSent((RegisteredBuffer) target);
            case OperationTable.READ -> transport.pulls.abandon((InboundFrame) target, bytes);
            default -> { }
        }
    }
}
