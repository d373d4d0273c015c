package dev.ferry.transport.fabric;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.CompletionQueue;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.FabricException;
import dev.ferry.fabric.FabricSession;
import dev.ferry.fabric.SharedReceiveContext;
import dev.ferry.memory.AllocatorConfig;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.ProgressNice;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The ByteExpress-style transport over libfabric: the API, and the wiring of the parts that do
 * the work.
 *
 * <pre>
 *  application threads          control threads (TCP)         progress thread (libfabric)
 *  connect, send, release  -->  ControlPlane: dial, accept,    ProgressLoop: duty cycle, timers,
 *        |                      handshake, heartbeats  ---+    Idler (cq fd, doorbell, park)
 *        +----------> ProgressProxy (the only door) <-----+--> SendPump, ReceiveDispatcher,
 *                                                              RendezvousPuller, CreditBalancer,
 *                                                              LinkTable, OperationTable
 * </pre>
 *
 * <p>One progress thread owns every libfabric call of the transport: it drains the completion
 * queue in batches, posts what application threads hand it through the {@link ProgressProxy},
 * pumps links (credits and send window permitting), pulls rendezvous payloads in chunks, and
 * reposts buffers the application releases. It spins briefly, then yields, then sleeps, so an
 * idle transport uses no CPU. A small TCP control channel per peer ({@link ControlPlane})
 * exchanges fabric addresses and link ids (bootstrap) and tells each side when the other goes
 * away. The parts reach each other through this class's fields, set once here before any thread
 * starts; the progress-thread parts assert that they run on it.
 */
final class FabricTransport implements Transport {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();
    /** Operations in flight at most (context slots). */
    private static final int SLOTS = 1 << 16;

    final TransportConfig config;
    final MessageHandler handler;
    final FabricSession session;
    final EndpointType type;
    final CompletionQueue cq;
    /** Where the queue cannot sleep: the word peers on this host ring after posting to us; else null. */
    final Doorbell doorbell;
    /** Whether receive completions name their sender (shared endpoints with FI_SOURCE). */
    final boolean sources;
    /** The receive context all connected links share, where the provider offers one; else null. */
    final SharedReceiveContext srx;
    /**
     * Whether all links take their receives from one queue (a shared endpoint or {@link #srx}):
     * buffers are posted once and granted to links as credits, and the {@link CreditBalancer}
     * moves them.
     */
    final boolean sharedQueue;
    final RegisteredAllocator allocator;
    final SendWindow window;
    /** Bytes of a receive buffer: a frame header and the largest eager payload. */
    final int receiveBytes;
    final RendezvousKeys rendezvousKeys;
    final FabricCounters counters = new FabricCounters();
    final ConcurrentHashMap<String, FabricPeer> peers = new ConcurrentHashMap<>();
    private final FramePool frames = new FramePool();

    final OperationTable ops;
    final ProgressLoop loop;
    /** The only way other threads reach the progress thread. */
    final ProgressProxy proxy;
    /** What a caller does when it gets the fabric token: post its own send, poll for its reply. */
    final CallerProgress callers;
    final SendPump sends;
    final ReceiveDispatcher receives;
    final RendezvousPuller pulls;
    final CreditBalancer credits;
    final LinkTable links;
    final ControlPlane control;
    private final String localAddress;
    private volatile boolean closed;

    FabricTransport(TransportConfig config, MessageHandler handler) {
        int nice = ProgressNice.requested(); // a bad value is refused before anything is opened
        this.config = config;
        this.handler = handler;
        this.window = new SendWindow(config.sendWindowBytesPerLink(), config.sendWindowBytesPerPeer(),
                config.sendWindowBytesPerProcess(), config.eagerThreshold());
        this.receiveBytes = FrameDescriptor.HEADER + config.eagerThreshold();
        this.session = openSession(config);
        this.type = session.info().endpointType();
        this.cq = session.completionQueue();
        this.doorbell = cq.waitable() ? null : Doorbell.create();
        this.sources = session.namesSources();
        this.srx = session.sharedReceiveContext();
        this.sharedQueue = type == EndpointType.RDM || srx != null;
        this.rendezvousKeys = new RendezvousKeys(session.domain());
        this.ops = new OperationTable(SLOTS);
        this.loop = new ProgressLoop(this, doorbell, nice);
        this.proxy = new ProgressProxy(loop, config.connectTimeoutMillis() + 5_000);
        RegisteredAllocator alloc = null;
        ControlPlane plane = null;
        try {
            // Slabs of up to 4 MiB, smaller for small pools so that a pool is never one idle slab;
            // control frames get a slab of their own on top of the send pool.
            long smallest = Math.min(config.sendPoolBytes(), Math.min(config.receivePoolBytes(), config.rendezvousPoolBytes()));
            long slab = Math.max(1L << 20, Math.min(4L << 20, Long.highestOneBit(smallest)));
            alloc = new RegisteredAllocator(new FabricRegistrar(session.domain()), AllocatorConfig.defaults()
                    .withSlabBytes(slab)
                    .withQuota(PoolKind.SEND, config.sendPoolBytes() + slab)
                    .withQuota(PoolKind.RECEIVE, config.receivePoolBytes())
                    .withQuota(PoolKind.RENDEZVOUS, config.rendezvousPoolBytes())
                    .withSharedSendPool(config.sharedSendBytes() > 0));
            this.allocator = alloc;
            this.sends = new SendPump(this, alloc);
            plane = new ControlPlane(this, proxy, peers, session.address(), doorbell == null ? "" : doorbell.path(),
                    routes());
        } catch (IOException | RuntimeException e) {
            if (alloc != null) {
                closeQuietly(alloc);
            }
            if (doorbell != null) {
                doorbell.close();
            }
            ops.close();
            session.close();
            throw new TransportException(Reason.UNAVAILABLE, "cannot open the " + config.provider() + " transport on "
                    + config.bindHost() + ":" + config.bindPort() + ": " + e.getMessage(), e);
        }
        this.control = plane;
        this.localAddress = plane.localAddress();
        this.receives = new ReceiveDispatcher(this);
        this.pulls = new RendezvousPuller(this);
        this.credits = new CreditBalancer(this);
        this.links = new LinkTable(this);
        this.callers = new CallerProgress(this, loop);
        loop.start("ferry-progress-" + plane.port());
        plane.start();
    }

    /**
     * Opens the provider: {@code name} alone tries connected (MSG) endpoints, then reliable
     * datagrams (RDM); {@code name/msg} or {@code name/rdm} forces one.
     */
    private static FabricSession openSession(TransportConfig config) {
        String provider = config.provider();
        String forced = null;
        int slash = provider.indexOf('/');
        if (slash > 0) {
            forced = provider.substring(slash + 1).toUpperCase(java.util.Locale.ROOT);
            provider = provider.substring(0, slash);
        }
        FabricException first = null;
        StringBuilder reasons = new StringBuilder();
        for (EndpointType t : new EndpointType[] {EndpointType.MSG, EndpointType.RDM}) {
            if (forced != null && !forced.equals(t.name())) {
                continue;
            }
            try {
                return FabricSession.open(provider, t, config.bindHost(), t == EndpointType.MSG, 8192, true);
            } catch (FabricException e) {
                first = first == null ? e : first;
                reasons.append(reasons.isEmpty() ? "" : "; ").append(t).append(": ").append(e.getMessage());
            }
        }
        throw new TransportException(Reason.UNAVAILABLE, "libfabric provider '" + config.provider() + "' is not available ("
                + (reasons.isEmpty() ? "unknown endpoint type " + forced : reasons) + ")", first);
    }

    TransportConfig config() {
        return config;
    }

    RegisteredAllocator allocator() {
        return allocator;
    }

    SendWindow window() {
        return window;
    }

    FramePool frames() {
        return frames;
    }

    boolean isClosed() {
        return closed;
    }

    /**
     * Whether the caller holds the fabric token ({@link FabricToken}), the right to call libfabric
     * and to touch what the progress loop owns: the progress thread at work, or a caller it lent
     * the token to.
     */
    boolean holdsFabric() {
        return loop.holdsFabric();
    }

    @Override
    public String localAddress() {
        return localAddress;
    }

    /** Routes per peer: streams share this many links at most. */
    private int routes() {
        return type == EndpointType.MSG ? config.linksPerPeer() : 1;
    }

    @Override
    public Peer connect(String address) {
        if (closed) {
            throw new TransportException(Reason.CLOSED, "transport is closed");
        }
        FabricPeer existing = peers.get(address);
        if (existing != null && existing.failure() == null) {
            control.awaitReady(existing);
            return existing;
        }
        synchronized (this) {
            existing = peers.get(address);
            if (existing != null && existing.failure() == null) {
                control.awaitReady(existing);
                return existing;
            }
            return control.dial(address);
        }
    }

    /** The application closes {@code peer}: any thread. */
    void closePeer(FabricPeer peer) {
        TransportException cause = new TransportException(Reason.CLOSED, "peer " + peer.address() + " closed by the application");
        // A connect from now on opens a new peer, as Peer.close() promises, even before the
        // progress thread has torn this one down (it would otherwise return the dying peer).
        peers.remove(peer.address(), peer);
        if (holdsFabric()) {
            links.teardown(peer, cause, true);
        } else if (!closed) {
            proxy.run(() -> links.teardown(peer, cause, true));
        }
    }

    /**
     * Posts a send, or hands it to the progress thread; fails it if nothing is left to post it.
     * A send made by the token's holder (a handler answering on the progress thread) is queued
     * on its link at once, and posted in the same turn. Another thread posts it itself if it
     * gets the token ({@link CallerProgress#post}), else hands it over. A thread that borrowed
     * the token queues a send only once the hand-over queue is empty, and keeps any send made
     * meanwhile by application code it ran for after it ({@link CallerProgress#mustDefer}): each
     * thread's sends stay in order whichever way they go.
     */
    void submitSend(OutboundFrame frame) {
        if (holdsFabric()) {
            if (loop.inProgressThread()) {
                sends.enqueue(frame);
            } else if (loop.finished()) {
                frame.free(); // a callback run by the last drain of hand-overs: nothing posts any more
                SendOutcomes.failFuture(frame, new TransportException(Reason.CLOSED, "transport closed"));
            } else if (callers.mustDefer()) {
                callers.defer(frame);
            } else {
                sends.enqueue(frame);
            }
            return;
        }
        if (callers.post(frame)) {
            return;
        }
        handOver(frame);
    }

    /** Hands {@code frame} to the progress thread, as a thread without the token; fails it if nothing will post it. */
    void handOver(OutboundFrame frame) {
        if (!proxy.send(frame)) {
            frame.free(); // never posted: no rendezvous key, no window taken by the progress thread
            SendOutcomes.failFuture(frame, new TransportException(Reason.CLOSED, "transport closed"));
        } else if (loop.finished()) {
            proxy.failAfterShutdown(); // the progress thread's last drain may have missed it
        }
    }

    // ------------------------------------------------------------------------------------------
    // Counters and close

    @Override
    public TransportCounters counters() {
        long available = 0;
        // Reading credits of links from another thread is a snapshot; the list only grows.
        for (Link link : links.all()) {
            available += link.credits.available();
        }
        FabricCounters c = counters;
        return new TransportCounters(links.linksOpen(), c.messagesSent.sum(), c.messagesReceived.sum(),
                c.bytesSent.sum(), c.bytesReceived.sum(), c.eagerSent.sum(), c.rendezvousSent.sum(), available,
                c.creditStalls.sum(), c.windowStalls.sum(), window.inFlight(), window.peak(), c.reposts.sum(),
                c.held.get(), c.linkFailures.sum(), c.creditsGranted.sum(), c.creditsReclaimed.sum(),
                control.authenticationFailures(), c.creditFramesSent.sum());
    }

    /**
     * Lends the calling thread to the transport while it waits for {@code done} (a reply), at
     * most {@code nanos}: it polls the completion queue itself whenever the fabric token is free,
     * so that a reply that comes soon wakes no thread. Returns at once where the host has more
     * runnable threads than cores.
     */
    @Override
    public boolean awaitPolling(java.util.concurrent.Future<?> done, long nanos) {
        return callers.await(done, nanos);
    }

    /** Sends posted by their own thread, and completion-queue polls by waiting callers; for tests. */
    long[] callerCounts() {
        return new long[] {callers.directPosts.sum(), callers.callerPolls.sum()};
    }

    /**
     * The fabric token: its holder and acquisitions are what {@link KilledSenderLock} watches, and
     * tests break its exclusion to see the assertion on a second holder fire.
     */
    FabricToken token() {
        return loop.token();
    }

    @Override
    public String provider() {
        return config.provider();
    }

    @Override
    public java.util.Optional<dev.ferry.memory.AllocatorStats> allocatorStats() {
        return java.util.Optional.of(allocator.stats());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        control.close();
        loop.wakeToClose();
        try {
            loop.thread().join(10_000);
            control.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Progress thread, on the way out: fails every peer, then frees fabric and memory. */
    void shutdown(CompletionBatch batch) {
        new TransportShutdown(this).run(batch);
    }

    private static void closeQuietly(AutoCloseable closeable) {
        ControlPlane.closeQuietly(closeable);
    }

    static long randomLong() {
        return RANDOM.nextLong();
    }

    // ------------------------------------------------------------------------------------------
    // Fault injection and diagnostics, for tests

    /**
     * Fault injection: sends raw bytes as a frame on the peer's first link, as a broken or
     * hostile peer would. Returns once the frame is posted.
     */
    void injectFrame(Peer peer, byte[] bytes) {
        FabricPeer p = (FabricPeer) peer;
        CompletableFuture<Void> posted = new CompletableFuture<>();
        RegisteredBuffer b = allocator.tryAllocate(PoolKind.SEND, Math.max(64, bytes.length));
        MemorySegment.copy(MemorySegment.ofArray(bytes), 0, b.segment(), 0, bytes.length);
        Runnable[] attempt = new Runnable[1];
        attempt[0] = () -> {
            if (sends.postRaw(p.links[0], b, bytes.length)) {
                posted.complete(null);
            } else {
                proxy.run(attempt[0]); // retry on the next turn, after progress
            }
        };
        proxy.run(attempt[0]);
        posted.orTimeout(config.connectTimeoutMillis(), TimeUnit.MILLISECONDS).join();
    }

    /** Dialers refused for want of the shared secret; for tests. */
    long authenticationFailures() {
        return control.authenticationFailures();
    }

    /** Incoming handshakes not yet authenticated; for tests. */
    int handshakesPending() {
        return control.handshakesPending();
    }

    /** The provider's own address (on tcp, the sockaddr of its listener); for tests. */
    byte[] fabricAddress() {
        return session.address();
    }

    /** Fault injection: stops (or resumes) this side's heartbeats, as a hung process would. */
    void pauseHeartbeats(boolean paused) {
        control.pauseHeartbeats(paused);
    }

    /** Whether all links share one receive queue (and the {@link CreditBalancer} moves its credits); for tests. */
    boolean sharesReceiveQueue() {
        return sharedQueue;
    }

    /**
     * Whether the provider says which link each frame came on (a queue per link, or FI_SOURCE);
     * where not, a frame that names no link cannot be blamed on one. For tests.
     */
    boolean knowsSenders() {
        return !sharedQueue || sources;
    }

    /** Rendezvous keys registered and closed so far. */
    long[] rendezvousKeyCounts() {
        return proxy.call(rendezvousKeys::counts);
    }

    /** The shared receive queue's entries, buffers posted to it and credits granted on it; for tests. */
    long[] sharedQueueUse() {
        return proxy.call(() -> new long[] {links.receiveQueueEntries(), credits.sharedPosted(), credits.sharedGranted()});
    }

    /** One line per link: its state, credits and queues; for diagnostics. */
    String describeLinks() {
        return proxy.call(() -> {
            StringBuilder b = new StringBuilder();
            for (Link link : links.all()) {
                b.append(link.describe()).append('\n');
            }
            return b.append("shared posted=").append(credits.sharedPosted()).append(" granted=")
                    .append(credits.sharedGranted()).toString();
        });
    }

    @Override
    public String toString() {
        return "fabric transport " + config.provider() + " " + type + " at " + localAddress;
    }
}
