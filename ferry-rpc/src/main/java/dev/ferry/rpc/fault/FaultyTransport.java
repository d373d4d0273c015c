package dev.ferry.rpc.fault;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.Transports;
import dev.ferry.transport.TransportException.Reason;

/**
 * A transport that breaks on command, around a real one.
 *
 * <p>Failing a link is real: the decorator {@linkplain Peer#close() closes} the real peer, so its
 * links go down, its sends in flight fail and the remote side sees the peer go, as after a link
 * error. The application sees one {@link Peer} per real peer; the one failed by command fails at
 * once (its sends fail, the handler hears {@code onPeerClosed}) and frames the real transport still
 * delivers for it before its teardown completes are dropped. The next {@link #connect} opens a new
 * real peer.
 *
 * <p>Buffers are the real transport's: encoding stays zero-copy through the decorator.
 */
public final class FaultyTransport implements Transport {

    private final Transport inner;
    private final MessageHandler handler;
    private final ConcurrentHashMap<Peer, FaultyPeer> peers = new ConcurrentHashMap<>();
    private volatile boolean refuseConnects;
    private final AtomicInteger connectsToRefuse = new AtomicInteger();
    private final AtomicInteger framesToDrop = new AtomicInteger();
    private final AtomicInteger framesToDelay = new AtomicInteger();
    private volatile long delayMillis;
    private final AtomicLong linksFailed = new AtomicLong();
    private final AtomicLong framesDropped = new AtomicLong();
    private final AtomicLong framesDelayed = new AtomicLong();
    private final AtomicLong connectsRefused = new AtomicLong();
    private final AtomicLong framesAfterFailure = new AtomicLong();
    private volatile ScheduledExecutorService delayer;

    private FaultyTransport(TransportConfig config, MessageHandler handler) {
        this.handler = handler;
        this.inner = Transports.open(config, new Inbound());
    }

    /** Opens the real transport of {@code config} inside a faulty one. */
    public static FaultyTransport open(TransportConfig config, MessageHandler handler) {
        return new FaultyTransport(config, handler);
    }

    /** The real transport. */
    public Transport inner() {
        return inner;
    }

    // ------------------------------------------------------------------------------------------
    // Commands

    /** Fails every link now, as if each had hit an error. */
    public void failLinks() {
        for (FaultyPeer peer : List.copyOf(peers.values())) {
            fail(peer, new TransportException(Reason.PEER_FAILED, "link to " + peer.address() + " failed (injected)"));
        }
    }

    /** Fails the link to {@code address} now; false if there was none up. */
    public boolean failLink(String address) {
        boolean any = false;
        for (FaultyPeer peer : List.copyOf(peers.values())) {
            if (peer.address().equals(address)) {
                any |= fail(peer, new TransportException(Reason.PEER_FAILED, "link to " + address + " failed (injected)"));
            }
        }
        return any;
    }

    /** Refuses every connect while {@code refuse}. */
    public void refuseConnects(boolean refuse) {
        refuseConnects = refuse;
    }

    /** Refuses the next {@code count} connects. */
    public void refuseNextConnects(int count) {
        connectsToRefuse.set(count);
    }

    /** Drops the next {@code count} frames sent, silently: their futures succeed. */
    public void dropNext(int count) {
        framesToDrop.set(count);
    }

    /** Delays the next {@code count} frames sent by {@code millis} each. */
    public void delayNext(int count, long millis) {
        delayMillis = millis;
        framesToDelay.set(count);
    }

    /** Clears every pending fault (links already failed stay failed). */
    public void heal() {
        refuseConnects = false;
        connectsToRefuse.set(0);
        framesToDrop.set(0);
        framesToDelay.set(0);
    }

    /** Links failed by command so far. */
    public long linksFailed() {
        return linksFailed.get();
    }

    public long framesDropped() {
        return framesDropped.get();
    }

    public long framesDelayed() {
        return framesDelayed.get();
    }

    public long connectsRefused() {
        return connectsRefused.get();
    }

    /** Frames that arrived for a peer failed by command before its real teardown, dropped. */
    public long framesAfterFailure() {
        return framesAfterFailure.get();
    }

    private boolean fail(FaultyPeer peer, TransportException cause) {
        if (!peer.fail(cause)) {
            return false;
        }
        linksFailed.incrementAndGet();
        handler.onPeerClosed(peer, cause);
        // The real links go down too. The entry stays until the real transport reports the
        // peer closed, so that frames it still delivers meanwhile are recognised and dropped.
        peer.inner.close();
        return true;
    }

    // ------------------------------------------------------------------------------------------
    // Transport

    @Override
    public String localAddress() {
        return inner.localAddress();
    }

    @Override
    public Peer connect(String address) {
        if (refuseConnects || connectsToRefuse.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
            connectsRefused.incrementAndGet();
            throw new TransportException(Reason.UNREACHABLE, "connect to " + address + " refused (injected)");
        }
        return peerFor(inner.connect(address));
    }

    /** The application's peer for {@code real}: one per real peer, failed for good once failed. */
    private FaultyPeer peerFor(Peer real) {
        FaultyPeer peer = peers.get(real);
        return peer != null ? peer : peers.computeIfAbsent(real, p -> new FaultyPeer(this, p));
    }

    @Override
    public TransportCounters counters() {
        return inner.counters();
    }

    @Override
    public String provider() {
        return inner.provider();
    }

    @Override
    public java.util.Optional<dev.ferry.memory.AllocatorStats> allocatorStats() {
        return inner.allocatorStats();
    }

    @Override
    public void close() {
        inner.close();
        ScheduledExecutorService d = delayer;
        if (d != null) {
            d.shutdownNow();
        }
    }

    private ScheduledExecutorService delayer() {
        ScheduledExecutorService d = delayer;
        if (d == null) {
            synchronized (this) {
                d = delayer;
                if (d == null) {
                    d = Executors.newSingleThreadScheduledExecutor(
                            r -> Thread.ofPlatform().daemon().name("ferry-fault-delay").unstarted(r));
                    delayer = d;
                }
            }
        }
        return d;
    }

    /** Routes inbound frames to the application's peer for their real peer. */
    private final class Inbound implements MessageHandler {

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            FaultyPeer peer = peerFor(from);
            if (peer.failed()) {
                framesAfterFailure.incrementAndGet();
                message.release();
                return;
            }
            handler.onMessage(peer, message);
        }

        @Override
        public void onPeerClosed(Peer peer, Throwable cause) {
            FaultyPeer current = peers.remove(peer);
            if (current != null && current.fail(cause)) {
                handler.onPeerClosed(current, cause);
            }
        }
    }

    /** The application's view of a real peer, which commands can fail. */
    static final class FaultyPeer implements Peer {

        private final FaultyTransport transport;
        final Peer inner;
        private volatile Throwable failure;

        FaultyPeer(FaultyTransport transport, Peer inner) {
            this.transport = transport;
            this.inner = inner;
        }

        synchronized boolean fail(Throwable cause) {
            if (failure != null) {
                return false;
            }
            failure = cause;
            return true;
        }

        boolean failed() {
            return failure != null;
        }

        @Override
        public void close() {
            // The real transport reports the close to the handler, which fails this peer.
            inner.close();
        }

        @Override
        public String address() {
            return inner.address();
        }

        private void checkOpen() {
            Throwable cause = failure;
            if (cause != null) {
                throw new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), "peer " + address() + " has failed: " + cause.getMessage(), cause);
            }
        }

        @Override
        public OutboundMessage allocate(int length) {
            checkOpen();
            return inner.allocate(length);
        }

        @Override
        public OutboundMessage tryAllocate(int length) {
            checkOpen();
            return inner.tryAllocate(length);
        }

        @Override
        public CompletableFuture<Void> send(int stream, OutboundMessage message) {
            Throwable cause = failure;
            if (cause != null) {
                message.release();
                return CompletableFuture.failedFuture(new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), "peer " + address() + " has failed", cause));
            }
            if (transport.framesToDrop.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                transport.framesDropped.incrementAndGet();
                message.release();
                return CompletableFuture.completedFuture(null);
            }
            if (transport.framesToDelay.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                transport.framesDelayed.incrementAndGet();
                CompletableFuture<Void> future = new CompletableFuture<>();
                transport.delayer().schedule(() -> {
                    if (failure != null) {
                        message.release();
                        future.completeExceptionally(new TransportException(TransportException.reasonOf(failure, Reason.PEER_FAILED), "peer " + address() + " has failed", failure));
                        return;
                    }
                    inner.send(stream, message).whenComplete((v, e) -> {
                        if (e != null) {
                            future.completeExceptionally(e);
                        } else {
                            future.complete(null);
                        }
                    });
                }, transport.delayMillis, TimeUnit.MILLISECONDS);
                return future;
            }
            return inner.send(stream, message);
        }

        @Override
        public boolean trySend(int stream, OutboundMessage message) {
            if (failure != null || transport.framesToDrop.get() > 0 || transport.framesToDelay.get() > 0) {
                return false;
            }
            return inner.trySend(stream, message);
        }

        @Override
        public boolean isOpen() {
            return failure == null && inner.isOpen();
        }

        @Override
        public String toString() {
            return "faulty " + inner;
        }
    }
}
