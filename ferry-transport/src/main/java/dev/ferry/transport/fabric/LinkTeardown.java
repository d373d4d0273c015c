package dev.ferry.transport.fabric;

import java.util.ArrayList;
import java.util.concurrent.atomic.AtomicBoolean;

import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.Fabric;
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
 *
 * <p>A connected endpoint with rendezvous reads in flight is not closed at once: the reads are
 * orphaned (the puller stops counting them, their targets stay) and the endpoint closes once
 * the provider has ended them all, which it does as soon as the peer's connection ends (or the
 * peer answers them), or after {@link #CLOSE_GRACE_NANOS} at the latest. libfabric's tcp
 * provider up to 1.17.0 completes and frees a read twice when its endpoint is disabled while the
 * answer to the read is half received (ofiwg/libfabric#8656, #8660): an error completion with context
 * 0 comes out, and the pool of transfer entries that every endpoint of the completion queue
 * shares is corrupt from then on (other peers' sends stall, receives complete empty).
 */
final class LinkTeardown {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /**
     * How long a torn-down link's endpoint waits for its reads to end before it closes anyway: a
     * dead peer's connection ends in far less; a peer alive but silent this long is hung.
     */
    static final long CLOSE_GRACE_NANOS = 5_000_000_000L;

    private final FabricTransport transport;
    private final LinkTable links;
    private final TransportConfig config;
    private final EndpointType type;
    /** Torn-down links whose endpoints wait for their reads to end, oldest first. */
    private final ArrayList<Link> closing = new ArrayList<>();

    /** Whether the note on libfabric's half-read bug was logged in this process. */
    private static final AtomicBoolean TOLD = new AtomicBoolean();

    LinkTeardown(FabricTransport transport, LinkTable links) {
        this.transport = transport;
        this.links = links;
        this.config = transport.config;
        this.type = transport.type;
        if (type == EndpointType.MSG && "tcp".equals(config.provider()) && mayDoubleCompleteReads(Fabric.libraryVersion())
                && TOLD.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.INFO, "libfabric " + Fabric.libraryVersion() + ": its tcp provider up to"
                    + " 1.17.0 completes a read twice when an endpoint is disabled with the read half answered"
                    + " (ofiwg/libfabric#8660); torn-down links keep their endpoints open until their reads"
                    + " end, up to " + CLOSE_GRACE_NANOS / 1_000_000_000L + " s. libfabric 1.18 or later has the fix");
        }
    }

    /**
     * Whether libfabric {@code version} ("major.minor", as {@link Fabric#libraryVersion()} gives
     * it: the revision is not reported) may be one whose tcp provider completes a half-answered
     * read twice: 1.17 and older (1.17.0 has the bug; a later 1.17 revision may have the fix).
     */
    static boolean mayDoubleCompleteReads(String version) {
        String[] parts = version.split("\\.");
        try {
            int major = Integer.parseInt(parts[0]);
            int minor = parts.length > 1 ? Integer.parseInt(parts[1]) : 0;
            return major < 1 || (major == 1 && minor <= 17);
        } catch (NumberFormatException e) {
            return true; // unknown: assume the worst, the note costs one line
        }
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

    /** Gone peers' memory whose slabs messages still held use, until their grace ends. */
    private final java.util.ArrayList<PeerMemory> retiredMemory = new java.util.ArrayList<>();

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
            link.freeReserved();
            if (type == EndpointType.MSG && link.endpoint != null && !link.endpoint.isClosed()) {
                if (link.closeCause == null) {
                    int reads = transport.ops.orphanReads(link, (kind, target, of, bytes) -> transport.pulls.detach(bytes));
                    if (reads > 0 && !transport.isClosed()) {
                        link.closeCause = cause;
                        link.closeByNanos = System.nanoTime() + CLOSE_GRACE_NANOS;
                        closing.add(link);
                    } else {
                        closeEndpoint(link, cause);
                    }
                }
            } else if (type != EndpointType.MSG) {
                if (transport.isClosed()) {
                    // The shutdown: the shared endpoint closes next and nobody reads its
                    // completions, so the sends still in flight on it fail now rather than never.
                    transport.ops.dropAll(link, (kind, target, of, bytes) -> dropped(kind, target, of, bytes, cause));
                } else {
                    // The shared endpoint stays: the link's sends fail now (the provider may never
                    // complete a send to a peer that is gone), their buffers once they complete.
                    transport.ops.orphanSends(link, (kind, target, of, bytes) ->
                            transport.sends.outcomes.onMessageOrphaned((OutboundFrame) target, of, cause));
                }
            }
        }
        transport.sends.outcomes.failRendezvous(peer, cause);
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
        if (peer.memory != null) {
            // Slabs that messages still held use go with their last release, or at the grace's end.
            long now = System.nanoTime();
            peer.memory.close(now);
            if (!peer.memory.expire(now)) {
                retiredMemory.add(peer.memory);
            }
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

    /** Whether torn-down links wait for their reads to end before their endpoints close. */
    boolean closing() {
        return !closing.isEmpty();
    }

    /**
     * An orphaned read of {@code link} into {@code message} ended ({@code bytes}, in success or in
     * error): its bytes settle, and the endpoint closes once the link has no read left.
     */
    void readEnded(Link link, InboundFrame message, long bytes) {
        assert transport.holdsFabric();
        transport.pulls.settle(message, bytes);
        if (link.closeCause != null && !transport.ops.readsInFlight(link) && closing.remove(link)) {
            closeEndpoint(link, link.closeCause);
        }
    }

    /** Closes the endpoints whose reads did not end in time; all of them if {@code all} (the shutdown). */
    void closeOverdue(long now, boolean all) {
        assert transport.holdsFabric();
        for (int i = 0; i < closing.size(); ) {
            Link link = closing.get(i);
            if (!all && link.closeByNanos - now > 0) {
                i++;
                continue;
            }
            closing.remove(i);
            if (!all) {
                LOG.log(System.Logger.Level.WARNING, "closing " + link + " with reads of its peer still in flight after "
                        + CLOSE_GRACE_NANOS / 1_000_000_000L + " s: the peer is alive but does not answer them (libfabric's tcp"
                        + " provider up to 1.17.0 may complete a half-received read twice and corrupt its queue)");
            }
            closeEndpoint(link, link.closeCause);
        }
    }

    /** Closes {@code link}'s endpoint: nothing completes on it any more, so what it still held is freed. */
    private void closeEndpoint(Link link, Throwable cause) {
        link.endpoint.close();
        transport.ops.dropAll(link, (kind, target, of, bytes) -> dropped(kind, target, of, bytes, cause));
    }

    private void dropped(byte kind, Object target, Link link, long bytes, Throwable cause) {
        switch (kind) {
            case OperationTable.RECV -> ((RegisteredBuffer) target).release();
            case OperationTable.SEND_MESSAGE -> transport.sends.outcomes.onMessageDropped((OutboundFrame) target, link, cause);
            case OperationTable.SEND_CONTROL -> transport.sends.onControlSent((RegisteredBuffer) target);
            case OperationTable.READ -> transport.pulls.abandon((InboundFrame) target, bytes);
            case OperationTable.ORPHANED_READ -> transport.pulls.settle((InboundFrame) target, bytes);
            case OperationTable.ORPHANED_SEND -> transport.sends.outcomes.onOrphanEnded((OutboundFrame) target);
            default -> { }
        }
    }

    /** Whether gone peers' slabs are still mapped for messages held ({@link PeerMemory#expire}). */
    boolean holdsMappings() {
        return !retiredMemory.isEmpty();
    }

    /** Unmaps the slabs of gone peers whose grace ended by {@code now}. */
    void expireMappings(long now) {
        retiredMemory.removeIf(memory -> memory.expire(now));
    }

    /** The transport closes: every gone peer's slab is unmapped, also those of messages still held. */
    void closeMappings() {
        for (PeerMemory memory : retiredMemory) {
            memory.closeAll();
        }
        retiredMemory.clear();
    }
}
