package dev.ferry.transport.fabric;

import java.io.IOException;
import java.net.Socket;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.BiConsumer;

import dev.ferry.fabric.FabricSession;
import dev.ferry.memory.PoolExhaustedException;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * A peer of the fabric transport: its links, its control channel, and the bytes in flight to it.
 *
 * <p>Streams map onto a fixed number of routes ({@code linksPerPeer} on connected endpoints, one
 * on a shared endpoint), stream {@code s} to route {@code s mod routes}. The first link is opened
 * by the handshake; the link of any other route opens the first time a stream needs it. Where
 * {@code maxLinks} or the receive pool allow no further link, the route shares the first one.
 */
final class FabricPeer implements Peer {

    final FabricTransport transport;
    private final String address;
    final ControlChannel control;
    /** Every link opened to the peer, in order; written by the progress thread. */
    Link[] links = new Link[0];
    /** The link of each route, or null before it is needed. */
    final AtomicReferenceArray<Link> routes;
    /** Set once the handshake is over: the control channel then carries heartbeats. */
    volatile boolean established;
    /** Counted down when the control channel's reader stops: the peer closed its end, or it broke. */
    final java.util.concurrent.CountDownLatch controlEnded = new java.util.concurrent.CountDownLatch(1);
    /** The peer's fabric address: what endpoints of further links connect to. */
    volatile byte[] remoteFabricAddress;
    /** shm only: a handle on the peer's region, taken at the handshake (ShmRegionLocks); closed at teardown. */
    volatile java.nio.channels.FileChannel shmRegion;
    /** Bytes in flight to this peer; guarded by the {@link SendWindow}. */
    long inFlight;
    /** Rendezvous bytes advertised to this peer and not released; guarded by the {@link SendWindow}. */
    long rendezvousInFlight;
    /** Fabric-level handle of the peer (reliable-datagram sessions). */
    long fabricAddress = -1;
    /** The address-vector entry behind {@link #fabricAddress} (reliable datagrams); removed at teardown. */
    FabricSession.Connection fabricConnection;
    /** The peer's doorbell where both sides poll without a wait object, on one host; else null. */
    Doorbell.Remote doorbell;
    /** The peer's send slabs, mapped to read its messages by reference; null where they cannot be. Set by the handshake. */
    PeerMemory memory;
    /** Whether the peer maps this side's send slabs, so messages to it may go by reference; token holder. */
    boolean mapsOurs;
    /** Messages up to this size go eagerly: the smaller of both sides' thresholds, set by the handshake. */
    int eagerLimit;
    final CompletableFuture<Void> ready = new CompletableFuture<>();
    private volatile Throwable failure;

    FabricPeer(FabricTransport transport, String address, Socket control, int routes) throws IOException {
        this.transport = transport;
        this.address = address;
        this.control = new ControlChannel(control);
        this.routes = new AtomicReferenceArray<>(routes);
    }

    @Override
    public String address() {
        return address;
    }

    /** The link of {@code stream}'s route, opening it if this is the first use. */
    Link link(int stream) {
        int route = Math.floorMod(stream, routes.length());
        Link link = routes.get(route);
        return link != null ? link : transport.links.routes.openRoute(this, route);
    }

    @Override
    public OutboundMessage allocate(int length) {
        checkUsable(length);
        try {
            long bytes = FrameDescriptor.PAYLOAD_OFFSET + (long) length;
            // The wait's Duration only when the pool is out of room: no object per send otherwise.
            RegisteredBuffer buffer = transport.allocator().tryAllocate(PoolKind.SEND, bytes);
            if (buffer == null) {
                // Buffers come back as sends complete: the progress thread reaps them soon while
                // a sender waits, instead of on its next turn of work.
                SendWindow window = transport.window();
                window.senderWaits(true);
                transport.loop.wakeForCompletions();
                try {
                    buffer = transport.allocator().allocate(PoolKind.SEND, bytes,
                            Duration.ofMillis(transport.config().connectTimeoutMillis()));
                } finally {
                    window.senderWaits(false);
                }
            }
            return new SendClaim(transport.frames().take(this, buffer, length));
        } catch (PoolExhaustedException e) {
            throw new TransportException(Reason.POOL_EXHAUSTED, "no send buffer of " + length + " bytes for " + address + " within "
                    + transport.config().connectTimeoutMillis() + " ms: the send pool is exhausted", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while waiting for a send buffer", e);
        } catch (IllegalStateException e) {
            throw new TransportException(Reason.CLOSED, "transport closed", e);
        }
    }

    @Override
    public OutboundMessage tryAllocate(int length) {
        checkUsable(length);
        RegisteredBuffer buffer = transport.allocator().tryAllocate(PoolKind.SEND,
                FrameDescriptor.PAYLOAD_OFFSET + (long) length);
        return buffer == null ? null : new SendClaim(transport.frames().take(this, buffer, length));
    }

    private void checkUsable(int length) {
        if (length < 0 || length > transport.config().maxMessageSize()) {
            throw new TransportException(Reason.BAD_INPUT, "message of " + length + " bytes is outside 0.."
                    + transport.config().maxMessageSize() + " (maxMessageSize)");
        }
        Throwable cause = failure;
        if (cause != null) {
            throw new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), "peer " + address + " has failed: " + cause.getMessage(), cause);
        }
    }

    @Override
    public CompletableFuture<Void> send(int stream, OutboundMessage message) {
        CompletableFuture<Void> future = new CompletableFuture<>();
        submit(stream, ((SendClaim) message).handOver(this), future);
        return future;
    }

    @Override
    public void sendAndForget(int stream, OutboundMessage message) {
        submit(stream, ((SendClaim) message).handOver(this), null);
    }

    @Override
    public void sendWatched(int stream, OutboundMessage message, BiConsumer<? super Void, ? super Throwable> onDone) {
        OutboundFrame frame = ((SendClaim) message).handOver(this);
        frame.onDone = java.util.Objects.requireNonNull(onDone, "onDone");
        submit(stream, frame, null);
    }

    @Override
    public boolean trySend(int stream, OutboundMessage message) {
        SendClaim claim = (SendClaim) message;
        OutboundFrame frame = claim.live();
        if (frame.peer != this) {
            claim.handOver(this); // throws, naming both peers, before any window is taken
        }
        if (failure != null) {
            return false;
        }
        Link link = link(stream);
        if (!link.ready || link.waiting.get() > 0 || !link.credits.canSendMessage()) {
            return false;
        }
        if (!transport.window().tryAcquire(link, frame.length)) {
            // The refusal counts as a waiter (SendWindow.awaited): completions that give the
            // window back must be reaped soon, also by a progress thread asleep on a long wait.
            transport.loop.wakeForCompletions();
            return false;
        }
        frame.admitted = true;
        submit(stream, claim.handOver(this), null);
        return true;
    }

    /** Hands {@code frame} to the progress thread; {@code future} (if any) completes with the send. */
    private void submit(int stream, OutboundFrame frame, CompletableFuture<Void> future) {
        Throwable cause = failure;
        Link link = null;
        if (cause == null) {
            try {
                link = link(stream); // may open the route: a timeout, interrupt or close throws
            } catch (RuntimeException e) {
                // The buffer goes back and a watcher hears of it; the future, not yet counted as
                // awaited, is the caller's to drop with the exception.
                frame.finish(new TransportException(TransportException.reasonOf(e, Reason.CLOSED),
                        "peer " + address + ": no link for stream " + stream, e));
                throw e;
            }
        }
        if (future != null) {
            transport.window().awaitedSendStarted(); // counted down when the frame settles it
        }
        frame.future = future;
        frame.stream = stream;
        if (cause != null) {
            frame.finish(new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), "peer " + address + " has failed", cause));
            return;
        }
        frame.link = link;
        link.waiting.incrementAndGet();
        transport.submitSend(frame);
    }

    @Override
    public boolean isOpen() {
        return failure == null && !transport.isClosed();
    }

    @Override
    public void close() {
        transport.closePeer(this);
    }

    Throwable failure() {
        return failure;
    }

    /** Marks the peer failed; true the first time. */
    synchronized boolean fail(Throwable cause) {
        if (failure != null) {
            return false;
        }
        failure = cause;
        ready.completeExceptionally(cause);
        return true;
    }

    @Override
    public String toString() {
        return "peer " + address;
    }
}
