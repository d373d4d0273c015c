package dev.ferry.transport.fabric;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

import dev.ferry.fabric.Endpoint;
import dev.ferry.memory.RegisteredBuffer;

/**
 * One reliable ordered pipe to a peer: a connected endpoint (one queue pair), or a peer address
 * on the shared reliable-datagram endpoint. Connected endpoints have a receive queue of their own
 * or take receives from one context shared by all links. Owned by the progress thread except where noted.
 */
final class Link {

    final FabricPeer peer;
    /**
     * This side's id of the link: peers put it in every frame they send on it. Random, and told
     * only to the link's peer, so that on a shared receive queue it also shows whose a frame is.
     */
    final int id;
    /**
     * This side's secret of the link: the peer puts it in every frame it sends on it, and a frame
     * without it is dropped. Random, and told only to the link's peer on the control channel.
     */
    final int token;
    /** The peer's id of the link, put in every frame this side sends. */
    int remoteId = -1;
    /** The peer's secret of the link, put in every frame this side sends. */
    int remoteToken;
    Endpoint endpoint;
    long address;
    boolean ready;
    /** The route of the peer this link serves (see {@link FabricPeer}). */
    int route;
    /** Set when the link could not be opened: its traffic goes to this link instead. */
    volatile Link retiredTo;
    /** Receive buffers this side posts for the link: the credits it grants the peer. */
    int granted;
    /**
     * The grant when the link was made: what the handshake tells the peer. Later grants go in
     * frame headers, so the handshake must not announce them again.
     */
    int firstGrant;
    /** When a frame last arrived on the link (progress thread's clock). */
    long lastArrivalNanos = System.nanoTime();
    /** A message came from the peer on this link: its side of the link is up. */
    boolean heard;
    /** A RECLAIM went out and its YIELD has not come back. */
    boolean reclaimPending;
    /** Receive buffers set aside for this link (posted once its endpoint exists). */
    RegisteredBuffer[] reserved;

    final ReceiveCredits credits;
    /** Messages waiting for a credit or for room in the send window, in send order. */
    final ArrayDeque<OutboundFrame> queue = new ArrayDeque<>();
    /** Control frames (credit returns, rendezvous releases) waiting for a credit. */
    final ArrayDeque<OutboundFrame> control = new ArrayDeque<>();
    /** Releases of the peer's messages by reference, riding this side's next eager frames. */
    final PendingReleases releases = new PendingReleases();
    /** Messages queued or handed over and not yet posted; read by {@code trySend} on other threads. */
    final java.util.concurrent.atomic.AtomicInteger waiting = new java.util.concurrent.atomic.AtomicInteger();
    /** Bytes in flight on this link; guarded by the {@link SendWindow}. */
    long inFlight;
    /** Rendezvous bytes advertised on this link and not released; guarded by the {@link SendWindow}. */
    long rendezvousInFlight;
    boolean creditStalled;
    boolean windowStalled;
    boolean active;
    /** The first of this link's operations in flight, chained by the {@link OperationTable}; -1 for none. */
    int firstOperation = -1;
    /**
     * Set when the link was torn down with reads in flight: its endpoint stays open until the
     * provider ends them ({@link LinkTeardown}), then closes with this cause.
     */
    Throwable closeCause;
    /** When the endpoint of a torn-down link closes even though its reads have not ended. */
    long closeByNanos;
    /** Per stream, inbound messages held back behind an unfinished rendezvous of that stream. */
    final Map<Integer, ArrayDeque<InboundFrame>> heldBack = new HashMap<>();

    Link(FabricPeer peer, int id, int token, ReceiveCredits credits) {
        this.peer = peer;
        this.id = id;
        this.token = token;
        this.credits = credits;
    }

    @Override
    public String toString() {
        return "link " + id + " to " + peer.address();
    }

    /** Its state, credits and queues on one line; for diagnostics. Token holder. */
    String describe() {
        return this + (ready ? " ready" : " down") + (peer.failure() != null ? " failed" : "") + " granted=" + granted
                + " window=" + credits.window() + " peerHeld=" + credits.peerHeld() + " owed=" + credits.owed()
                + " available=" + credits.available() + " queued=" + queue.size() + " control=" + control.size()
                + " releasesOwed=" + releases.size() + " reclaimPending=" + reclaimPending
                + " quietMs=" + (System.nanoTime() - lastArrivalNanos) / 1_000_000;
    }

    /** Frees the receive buffers set aside for this link's own queue, if its endpoint never took them. Token holder. */
    void freeReserved() {
        if (reserved != null) {
            for (RegisteredBuffer b : reserved) {
                if (b != null) {
                    b.release();
                }
            }
            reserved = null;
        }
    }
}
