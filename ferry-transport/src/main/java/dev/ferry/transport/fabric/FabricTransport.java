package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.CompletionError;
import dev.ferry.fabric.CompletionQueue;
import dev.ferry.fabric.ConnectionEvent;
import dev.ferry.fabric.Endpoint;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.Errno;
import dev.ferry.fabric.FabricException;
import dev.ferry.fabric.FabricSession;
import dev.ferry.fabric.Fi;
import dev.ferry.fabric.OperationContexts;
import dev.ferry.fabric.SharedReceiveContext;
import dev.ferry.memory.AllocatorConfig;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.admission.DropLog;
import dev.ferry.transport.admission.HandshakeGate;

/**
 * The ByteExpress-style transport over libfabric.
 *
 * <p>One progress thread owns every libfabric call of the transport: it drains the completion
 * queue in batches, posts what application threads hand it through a queue, pumps links (credits
 * and send window permitting), pulls rendezvous payloads in chunks, and repost buffers the
 * application releases. It spins briefly, then yields, then parks, so an idle transport uses no
 * CPU. A small TCP control channel per peer exchanges fabric addresses and link ids
 * (bootstrap) and tells each side when the other goes away.
 */
final class FabricTransport implements Transport {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    private static final int MAGIC = 0x46525933; // "FRY3"
    private static final java.security.SecureRandom NONCES = new java.security.SecureRandom();
    private static final int SLOTS = 1 << 16;
    private static final int BATCH = 64;
    private static final int CONTROL_BUFFERS = 2048;
    private static final int MAX_READS = 16;
    /**
     * Capacity of the command queue: far above what the progress thread drains in a turn, so
     * that only a flood of sends from many threads ever waits for room.
     */
    private static final int COMMANDS = 1 << 16;
    /** The per-buffer message table: a power of two above the receive buffers usually posted. */
    private static final int EAGER_FRAMES = 1 << 14;
    /** Links whose ids a frame's lookup finds without the map: a power of two. */
    private static final int RECENT_LINKS = 256;
    /**
     * Handshakes served at once. A connect storm (hundreds of peers starting together) then
     * queues on the listener instead of each handshake competing for the progress thread and
     * timing out together.
     */
    private static final int CONCURRENT_HANDSHAKES = 16;
    /** Connections the provider's listener accepts per pass of the progress thread at most. */
    private static final int MAX_ACCEPTS = 1024;

    // Operation kinds, per context slot.
    private static final byte RECV = 1;
    private static final byte SEND_MESSAGE = 2;
    private static final byte SEND_CONTROL = 3;
    private static final byte READ = 4;
    /** The endpoint was closed under the operation: its completion, if any comes, is ignored. */
    private static final byte DEAD = 5;
    private static final long QUARANTINE_NANOS = 5_000_000_000L;
    /** How often a shared receive queue's grants are reviewed. */
    private static final long REBALANCE_NANOS = 10_000_000L;
    /** Idle progress: busy-polls this long after the last work before sleeping. */
    private static final long SPIN_NANOS = 20_000L;
    /** Idle stretches count at most this much in {@link #idleGap}, so one long pause fades fast. */
    private static final long MAX_GAP_SAMPLE_NANOS = 1_000_000L;
    /** Without a wait object that sleeps: the park slice while traffic is recent. */
    private static final long PARK_NANOS = 50_000L;
    /** A link with no frame for this long gives its credits above the floor back. */
    private static final long IDLE_LINK_NANOS = 100_000_000L;
    /** A link with a frame this recent may be granted more, up to receiveBuffersPerLink. */
    private static final long ACTIVE_LINK_NANOS = 20_000_000L;
    /** Credits an idle link keeps: a message and the reserve for credit returns. */
    private static final int CREDIT_FLOOR = ReceiveCredits.RESERVE + 2;

    private final TransportConfig config;
    private final MessageHandler handler;
    private final FabricSession session;
    private final EndpointType type;
    private final CompletionQueue cq;
    /** Where the queue cannot sleep: the word peers on this host ring after posting to us; else null. */
    private final Doorbell doorbell;
    /** Idle progress while work comes in dense bursts: keeps polling this long before sleeping. */
    private final long pollBudgetNanos;
    /** Whether receive completions name their sender (shared endpoints with FI_SOURCE). */
    private final boolean sources;
    /** The receive context all connected links share, where the provider offers one; else null. */
    private final SharedReceiveContext srx;
    /**
     * Whether all links take their receives from one queue (a shared endpoint or {@link #srx}):
     * buffers are posted once and granted to links as credits, and {@link #rebalance} moves them.
     */
    private final boolean sharedQueue;
    private final RegisteredAllocator allocator;
    private final SendWindow window;
    private final int receiveBytes;
    private final ServerSocket controlSocket;
    private final String localAddress;
    private final Thread progress;
    private final Thread acceptor;
    private final Thread heartbeats;
    private volatile boolean closed;
    /** Fault injection: while set, this side sends no heartbeats (as a hung process would not). */
    private volatile boolean heartbeatsPaused;
    private volatile boolean parked;
    /** Guarded by {@link #cq}: no thread signals the queue once it is closed. */
    private boolean queueClosed;

    private final ConcurrentHashMap<String, FabricPeer> peers = new ConcurrentHashMap<>();
    private final FramePool frames = new FramePool();
    /** Deadline, bounds and slots of the control channel's incoming handshakes. */
    private final HandshakeGate gate;
    /** Connection requests at the provider's own listener refused for naming no link. */
    private final DropLog providerDrops = new DropLog(LOG, "fabric listener");
    /** Sends, releases and tasks for the progress thread; submitters wait while it is full. */
    private final ManyToOneArrayQueue<Object> commands = new ManyToOneArrayQueue<>(COMMANDS);
    /** Commands the progress thread gives itself while {@link #commands} is full: it never waits on itself. */
    private final ArrayDeque<Object> overflow = new ArrayDeque<>();

    // Progress-thread state.
    private final OperationContexts contexts = new OperationContexts(SLOTS);
    private final byte[] opKind = new byte[SLOTS];
    private final Object[] opTarget = new Object[SLOTS];
    private final Link[] opLink = new Link[SLOTS];
    private final long[] opBytes = new long[SLOTS];
    private final int[] freeSlots = new int[SLOTS];
    private int freeCount;
    private final List<Link> links = new java.util.concurrent.CopyOnWriteArrayList<>();
    /**
     * Links by id. Ids are random, so that a frame naming a link is also the link's token: on a
     * shared receive context nothing else says which connection a frame came on.
     */
    private final Map<Integer, Link> linksById = new HashMap<>();
    /**
     * Links recently named by frames, at their id's low bits: spares boxing the id of each frame
     * for {@link #linksById}, which never drops a link, so a hit is what the map would return.
     */
    private final Link[] recentLinks = new Link[RECENT_LINKS];
    private final ArrayDeque<Link> active = new ArrayDeque<>();
    private final ArrayDeque<InboundFrame> pulls = new ArrayDeque<>();
    /**
     * The message of each receive buffer, at the buffer's identity hash, reused each time the
     * buffer brings an eager message: the buffer is reposted only once its last message was
     * released. A collision costs a new frame, not a wrong one.
     */
    private final InboundFrame[] eagerFrames = new InboundFrame[EAGER_FRAMES];
    private int readsInFlight;
    private final ArrayDeque<Object[]> repostRetry = new ArrayDeque<>();
    /** Slots of operations dropped with their endpoint, and when they may be reused. */
    private final ArrayDeque<long[]> quarantine = new ArrayDeque<>();
    private final ArrayDeque<RegisteredBuffer> controlBuffers = new ArrayDeque<>();
    private final Map<Long, OutboundFrame> rendezvousOut = new HashMap<>();
    private final RendezvousKeys rendezvousKeys;
    private long nextCookie = 1;
    private int connecting;
    private long lastWork = System.nanoTime();
    /** Moving average (1/8) of the idle stretches between pieces of work. */
    private long idleGap = MAX_GAP_SAMPLE_NANOS;
    /** Shared receive queue: buffers posted, and credits granted to live links. */
    private long sharedPosted;
    private long sharedGranted;
    private long loops;
    private long lastRebalance;
    /** The progress thread's clock, read once per batch of completions. */
    private long batchNanos;

    // Counters.
    private final LongAdder messagesSent = new LongAdder();
    private final LongAdder messagesReceived = new LongAdder();
    private final LongAdder bytesSent = new LongAdder();
    private final LongAdder bytesReceived = new LongAdder();
    private final LongAdder eagerSent = new LongAdder();
    private final LongAdder rendezvousSent = new LongAdder();
    private final LongAdder creditStalls = new LongAdder();
    private final LongAdder windowStalls = new LongAdder();
    private final LongAdder reposts = new LongAdder();
    private final AtomicLong held = new AtomicLong();
    private final LongAdder linkFailures = new LongAdder();
    private final LongAdder creditsGranted = new LongAdder();
    private final LongAdder authenticationFailures = new LongAdder();
    private final LongAdder creditsReclaimed = new LongAdder();
    private volatile int linksOpen;

    FabricTransport(TransportConfig config, MessageHandler handler) {
        this.config = config;
        this.handler = handler;
        this.gate = new HandshakeGate(new DropLog(LOG, "control channel " + config.bindHost()),
                config.handshakeTimeoutMillis(), CONCURRENT_HANDSHAKES, config.connectTimeoutMillis());
        this.window = new SendWindow(config.sendWindowBytesPerLink(), config.sendWindowBytesPerPeer(),
                config.sendWindowBytesPerProcess(), config.eagerThreshold());
        this.receiveBytes = FrameDescriptor.HEADER + config.eagerThreshold();
        this.session = openSession(config);
        this.type = session.info().endpointType();
        this.cq = session.completionQueue();
        this.doorbell = cq.waitable() ? null : Doorbell.create();
        this.pollBudgetNanos = config.idlePollMicros() * 1_000L;
        this.sources = session.namesSources();
        this.srx = session.sharedReceiveContext();
        this.sharedQueue = type == EndpointType.RDM || srx != null;
        this.rendezvousKeys = new RendezvousKeys(session.domain());
        RegisteredAllocator alloc = null;
        ServerSocket socket = null;
        try {
            // Slabs of up to 4 MiB, smaller for small pools so that a pool is never one idle slab;
            // control frames get a slab of their own on top of the send pool.
            long smallest = Math.min(config.sendPoolBytes(), Math.min(config.receivePoolBytes(), config.rendezvousPoolBytes()));
            long slab = Math.max(1L << 20, Math.min(4L << 20, Long.highestOneBit(smallest)));
            alloc = new RegisteredAllocator(new FabricRegistrar(session.domain()), AllocatorConfig.defaults()
                    .withSlabBytes(slab)
                    .withQuota(PoolKind.SEND, config.sendPoolBytes() + slab)
                    .withQuota(PoolKind.RECEIVE, config.receivePoolBytes())
                    .withQuota(PoolKind.RENDEZVOUS, config.rendezvousPoolBytes()));
            for (int i = 0; i < CONTROL_BUFFERS; i++) {
                controlBuffers.add(alloc.tryAllocate(PoolKind.SEND, FrameDescriptor.HEADER));
            }
            socket = new ServerSocket();
            socket.bind(new InetSocketAddress(InetAddress.getByName(config.bindHost()), config.bindPort()), 1024);
        } catch (IOException | RuntimeException e) {
            if (alloc != null) {
                closeQuietly(alloc);
            }
            if (doorbell != null) {
                doorbell.close();
            }
            session.close();
            throw new TransportException("cannot open the " + config.provider() + " transport on "
                    + config.bindHost() + ":" + config.bindPort() + ": " + e.getMessage(), e);
        }
        this.allocator = alloc;
        this.controlSocket = socket;
        this.localAddress = config.bindHost() + ":" + socket.getLocalPort();
        for (int i = SLOTS - 1; i >= 0; i--) {
            freeSlots[freeCount++] = i;
        }
        this.progress = Thread.ofPlatform().name("ferry-progress-" + socket.getLocalPort()).daemon()
                .unstarted(this::runProgress);
        this.acceptor = Thread.ofPlatform().name("ferry-control-" + socket.getLocalPort()).daemon()
                .unstarted(this::runAcceptor);
        this.heartbeats = Thread.ofPlatform().name("ferry-heartbeat-" + socket.getLocalPort()).daemon()
                .unstarted(this::runHeartbeats);
        progress.start();
        acceptor.start();
        heartbeats.start();
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
        throw new TransportException("libfabric provider '" + config.provider() + "' is not available ("
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

    @Override
    public String localAddress() {
        return localAddress;
    }

    // ------------------------------------------------------------------------------------------
    // Bootstrap over the control channel

    @Override
    public Peer connect(String address) {
        if (closed) {
            throw new TransportException("transport is closed");
        }
        FabricPeer existing = peers.get(address);
        if (existing != null && existing.failure() == null) {
            awaitReady(existing);
            return existing;
        }
        synchronized (this) {
            existing = peers.get(address);
            if (existing != null && existing.failure() == null) {
                awaitReady(existing);
                return existing;
            }
            return dial(address);
        }
    }

    private FabricPeer dial(String address) {
        int colon = address.lastIndexOf(':');
        if (colon <= 0) {
            throw new TransportException("address must be host:port: " + address);
        }
        long timeout = config.connectTimeoutMillis();
        Socket socket = new Socket();
        FabricPeer peer = null;
        try {
            socket.setTcpNoDelay(true);
            socket.connect(new InetSocketAddress(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1))),
                    (int) timeout);
            socket.setSoTimeout((int) timeout);
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            authenticateToAcceptor(address, in, out);
            peer = new FabricPeer(this, address, socket, routes());
            FabricPeer p = peer;
            // The first link only: the others open when a stream needs them.
            Link[] created = onProgress(() -> createLinks(p, 1));
            out.writeUTF(localAddress);
            writeBytes(out, session.address());
            out.writeInt(created.length);
            for (Link link : created) {
                out.writeInt(link.id);
                out.writeInt(link.firstGrant);
            }
            writeAbilities(out);
            out.flush();
            readAnswer(address, in, false);
            byte[] fabricAddress = readBytes(in);
            int n = in.readInt();
            if (n != created.length) {
                throw new TransportException(address + " answered with " + n + " links for " + created.length);
            }
            int[] remoteIds = new int[n];
            int[] grants = new int[n];
            for (int i = 0; i < n; i++) {
                remoteIds[i] = in.readInt();
                grants[i] = in.readInt();
            }
            readAbilities(in, p);
            peers.put(address, peer);
            onProgress(() -> {
                completeConnector(p, fabricAddress, remoteIds, grants);
                return null;
            });
            awaitReady(peer);
            socket.setSoTimeout(0);
            peer.established = true;
            startControlReader(peer);
            return peer;
        } catch (IOException | RuntimeException e) {
            if (peer != null) {
                peers.remove(address, peer);
                FabricPeer failed = peer;
                TransportException cause = new TransportException("cannot connect to " + address + ": " + e.getMessage(), e);
                failed.fail(cause);
                command(() -> teardown(failed, cause, false));
            }
            closeQuietly(socket);
            if (e instanceof TransportException t) {
                throw t;
            }
            throw new TransportException("cannot connect to " + address + ": " + e, e);
        }
    }

    private void awaitReady(FabricPeer peer) {
        try {
            peer.ready.get(config.connectTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new TransportException("links to " + peer.address() + " not up within " + config.connectTimeoutMillis()
                    + " ms", e);
        } catch (ExecutionException e) {
            throw new TransportException("cannot connect to " + peer.address() + ": " + e.getCause().getMessage(),
                    e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException("interrupted while connecting to " + peer.address(), e);
        }
    }

    private void runAcceptor() {
        while (!closed) {
            Socket socket;
            try {
                socket = controlSocket.accept();
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(System.Logger.Level.WARNING, "control channel accept failed", e);
                }
                return;
            }
            HandshakeGate.Ticket ticket = gate.admit(socket);
            Thread.ofVirtual().name("ferry-handshake").start(() -> {
                try {
                    handshake(socket, ticket);
                } finally {
                    ticket.finished();
                }
            });
        }
    }

    private void handshake(Socket socket, HandshakeGate.Ticket ticket) {
        FabricPeer peer = null;
        try {
            socket.setTcpNoDelay(true);
            socket.setSoTimeout((int) config.connectTimeoutMillis());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            if (!authenticateDialer(socket, in, out)) {
                closeQuietly(socket);
                return;
            }
            if (!ticket.authenticated()) {
                return;
            }
            String address = in.readUTF();
            byte[] fabricAddress = readBytes(in);
            int n = in.readInt();
            if (n <= 0 || n > routes()) {
                throw new IOException("bad link count " + n);
            }
            int[] remoteIds = new int[n];
            int[] grants = new int[n];
            for (int i = 0; i < n; i++) {
                remoteIds[i] = in.readInt();
                grants[i] = in.readInt();
            }
            FabricPeer fresh = new FabricPeer(this, address, socket, routes());
            FabricPeer previous = peers.putIfAbsent(address, fresh);
            // A peer that dials again has usually just closed the old channel; its end may
            // reach this side a moment after the new hello.
            if (previous != null && previous.failure() == null && !controlEndsWithin(previous, 200)) {
                out.writeInt(MAGIC);
                out.writeByte(1);
                out.writeUTF("already connected to " + address);
                out.flush();
                closeQuietly(socket);
                return;
            } else if (previous != null) {
                if (previous.failure() == null) {
                    peerLost(previous, new TransportException("peer " + address + " connected again"));
                }
                peers.put(address, fresh);
            }
            peer = fresh;
            readAbilities(in, fresh);
            FabricPeer p = peer;
            Link[] created = onProgress(() -> {
                p.remoteFabricAddress = fabricAddress;
                Link[] made = createLinks(p, n);
                for (int i = 0; i < n; i++) {
                    made[i].remoteId = remoteIds[i];
                    made[i].route = i;
                    p.routes.set(i, made[i]);
                }
                acceptLinks(p, made, fabricAddress, grants);
                return made;
            });
            out.writeInt(MAGIC);
            out.writeByte(0);
            writeBytes(out, session.address());
            out.writeInt(created.length);
            for (Link link : created) {
                out.writeInt(link.id);
                out.writeInt(link.firstGrant);
            }
            writeAbilities(out);
            out.flush();
            socket.setSoTimeout(0);
            peer.established = true;
            startControlReader(peer);
        } catch (IOException | RuntimeException e) {
            if (peer != null) {
                LOG.log(System.Logger.Level.WARNING, "handshake with " + peer.address() + " failed", e);
                peerLost(peer, new TransportException("handshake with " + peer.address() + " failed: " + e.getMessage(), e));
            } else if (!closed) {
                ticket.failed(e);
            }
            closeQuietly(socket);
        }
    }

    /**
     * Dialing side of the challenge: sends a nonce, checks the acceptor's proof of the shared
     * secret, answers with its own. Nothing about this side's fabric is said before it passes.
     */
    private void authenticateToAcceptor(String address, DataInputStream in, DataOutputStream out) throws IOException {
        SharedSecret secret = config.secret();
        byte[] nonce = nonce();
        out.writeInt(MAGIC);
        out.writeBoolean(secret != null);
        out.write(nonce);
        out.flush();
        readAnswer(address, in, true);
        byte[] theirNonce = in.readNBytes(SharedSecret.NONCE_BYTES);
        byte[] theirProof = readBytes(in);
        byte[] proof = new byte[0];
        if (secret != null) {
            if (!secret.verify(theirProof, "ferry-server", nonce, theirNonce, 0)) {
                throw new UnauthenticatedException(address + " failed authentication: it does not hold the shared secret");
            }
            proof = secret.proof("ferry-client", theirNonce, nonce, 0);
        }
        writeBytes(out, proof);
    }

    /**
     * Accepting side of the challenge; false (refused, logged, the socket to be closed) unless
     * the dialer proves it holds this side's secret, or neither side has one.
     */
    private boolean authenticateDialer(Socket socket, DataInputStream in, DataOutputStream out) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new IOException("not a Ferry transport");
        }
        SharedSecret secret = config.secret();
        boolean theirs = in.readBoolean();
        byte[] theirNonce = in.readNBytes(SharedSecret.NONCE_BYTES);
        if (theirs != (secret != null)) {
            return refuse(socket, out, secret != null ? "this side requires the shared secret"
                    : "this side has no shared secret");
        }
        byte[] nonce = nonce();
        out.writeInt(MAGIC);
        out.writeByte(0);
        out.write(nonce);
        writeBytes(out, secret == null ? new byte[0] : secret.proof("ferry-server", theirNonce, nonce, 0));
        out.flush();
        byte[] proof;
        try {
            proof = readBytes(in, SharedSecret.PROOF_BYTES);
        } catch (IOException e) {
            return refuse(socket, null, "no proof of the shared secret (" + e.getMessage() + ")");
        }
        if (secret != null && !secret.verify(proof, "ferry-client", nonce, theirNonce, 0)) {
            return refuse(socket, out, "authentication failed");
        }
        return true;
    }

    private boolean refuse(Socket socket, DataOutputStream out, String reason) {
        if (config.secret() != null) {
            authenticationFailures.increment();
        }
        gate.dropLog().drop("refused", socket.getRemoteSocketAddress() + ": " + reason);
        if (out != null) {
            try {
                out.writeInt(MAGIC);
                out.writeByte(1);
                out.writeUTF(reason);
                out.flush();
            } catch (IOException e) {
                // it is gone already
            }
        }
        return false;
    }

    /**
     * Reads the acceptor's status: throws with its reason if it refused, an
     * {@link UnauthenticatedException} if it refused at the challenge.
     */
    private static void readAnswer(String address, DataInputStream in, boolean challenge) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new TransportException(address + " is not a Ferry transport");
        }
        if (in.readByte() != 0) {
            String reason = address + " refused the connection: " + in.readUTF();
            throw challenge ? new UnauthenticatedException(reason) : new TransportException(reason);
        }
    }

    private static byte[] nonce() {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        NONCES.nextBytes(nonce);
        return nonce;
    }

    /** The provider's own address (on tcp, the sockaddr of its listener); for tests. */
    byte[] fabricAddress() {
        return session.address();
    }

    /** Incoming handshakes not yet authenticated; for tests. */
    int handshakesPending() {
        return gate.pending();
    }

    /** Dialers refused for want of the shared secret; for tests. */
    long authenticationFailures() {
        return authenticationFailures.sum();
    }

    private static boolean controlEndsWithin(FabricPeer peer, long millis) {
        try {
            return peer.controlEnded.await(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private void startControlReader(FabricPeer peer) {
        Thread.ofVirtual().name("ferry-control-reader").start(() -> readControl(peer));
    }

    /**
     * Reads the control channel until it ends: its end is the peer's end, and so is a silence
     * longer than the heartbeat timeout.
     */
    private void readControl(FabricPeer peer) {
        ControlChannel control = peer.control;
        try {
            control.socket.setSoTimeout((int) config.heartbeatTimeoutMillis());
            DataInputStream in = control.in();
            while (true) {
                int type = in.read();
                switch (type) {
                    case -1 -> {
                        peerLost(peer, new TransportException("peer " + peer.address() + " closed its control channel"));
                        return;
                    }
                    case ControlChannel.HEARTBEAT -> { }
                    case ControlChannel.OPEN_LINK -> onOpenLink(peer, in.readInt(), in.readInt(), in.readInt());
                    case ControlChannel.LINK_OPENED -> {
                        int id = in.readInt();
                        int remoteId = in.readInt();
                        int grant = in.readInt();
                        command(() -> onLinkOpened(peer, id, remoteId, grant));
                    }
                    case ControlChannel.LINK_REFUSED -> {
                        int id = in.readInt();
                        String reason = in.readUTF();
                        command(() -> onLinkRefused(peer, id, reason));
                    }
                    default -> throw new IOException("unknown control message " + type);
                }
            }
        } catch (java.net.SocketTimeoutException e) {
            peerLost(peer, new TransportException("peer " + peer.address() + " sent no heartbeat for "
                    + config.heartbeatTimeoutMillis() + " ms", e));
        } catch (IOException e) {
            peerLost(peer, new TransportException("control channel to " + peer.address() + " broke: " + e.getMessage(), e));
        } finally {
            peer.controlEnded.countDown();
        }
    }

    /** Says every peer is alive, unless something else was said within the interval. */
    private void runHeartbeats() {
        long interval = TimeUnit.MILLISECONDS.toNanos(config.heartbeatIntervalMillis());
        while (!closed) {
            LockSupport.parkNanos(interval / 2);
            if (heartbeatsPaused) {
                continue;
            }
            long now = System.nanoTime();
            for (FabricPeer peer : peers.values()) {
                if (peer.established && peer.failure() == null && now - peer.control.lastWriteNanos() >= interval / 2) {
                    try {
                        peer.control.heartbeat();
                    } catch (IOException e) {
                        peerLost(peer, new TransportException("control channel to " + peer.address() + " broke: "
                                + e.getMessage(), e));
                    }
                }
            }
        }
    }

    /** Fault injection: stops (or resumes) this side's heartbeats, as a hung process would. */
    void pauseHeartbeats(boolean paused) {
        heartbeatsPaused = paused;
    }

    /** Routes per peer: streams share this many links at most. */
    private int routes() {
        return type == EndpointType.MSG ? config.linksPerPeer() : 1;
    }

    /**
     * Opens the link of {@code route} to {@code peer}: any thread, on a stream's first use of
     * the route. Blocks for the progress thread's answer (not for the peer's): frames queue on
     * the new link until it is up. Where no further link may open, the route shares route 0.
     */
    Link openRoute(FabricPeer peer, int route) {
        return onProgress(() -> {
            Link existing = peer.routes.get(route);
            if (existing != null) {
                return existing;
            }
            Link first = peer.routes.get(0);
            Link made;
            try {
                made = createLinks(peer, 1)[0];
            } catch (TransportException e) {
                LOG.log(System.Logger.Level.DEBUG, "route " + route + " to " + peer.address() + " shares "
                        + first + ": " + e.getMessage());
                peer.routes.set(route, first);
                return first;
            }
            made.route = route;
            peer.routes.set(route, made);
            int id = made.id;
            int grant = made.granted;
            Thread.ofVirtual().name("ferry-open-link").start(() -> {
                try {
                    peer.control.openLink(route, id, grant);
                } catch (IOException e) {
                    peerLost(peer, new TransportException("control channel to " + peer.address() + " broke: "
                            + e.getMessage(), e));
                }
            });
            return made;
        });
    }

    /** The peer asks for a link of {@code route}: control reader thread. */
    private void onOpenLink(FabricPeer peer, int route, int remoteId, int grant) throws IOException {
        Link made;
        try {
            made = onProgress(() -> {
                if (route < 0 || route >= routes() || peer.failure() != null) {
                    throw new TransportException("no route " + route);
                }
                Link link = createLinks(peer, 1)[0];
                link.remoteId = remoteId;
                link.route = route;
                link.credits.returned(grant);
                // A route this side has not opened itself sends on the peer's link.
                peer.routes.compareAndSet(route, null, link);
                connecting++; // the peer's connection request comes next
                return link;
            });
        } catch (TransportException e) {
            peer.control.linkRefused(remoteId, e.getMessage());
            return;
        }
        peer.control.linkOpened(remoteId, made.id, made.firstGrant);
    }

    /** The peer accepted a link this side asked for: progress thread. */
    private void onLinkOpened(FabricPeer peer, int id, int remoteId, int grant) {
        Link link = linksById.get(id);
        if (link == null || link.peer != peer || link.endpoint != null || link.retiredTo != null) {
            linkFailure(peer.links[0], "the peer opened unknown link " + id);
            return;
        }
        if (peer.failure() != null) {
            return;
        }
        link.remoteId = remoteId;
        link.credits.returned(grant);
        connectLink(link, peer.remoteFabricAddress);
    }

    /**
     * The peer refused a link this side asked for (its {@code maxLinks} or receive pool):
     * progress thread. The route shares the first link, and what queued on the refused one
     * moves there, in order.
     */
    private void onLinkRefused(FabricPeer peer, int id, String reason) {
        Link link = linksById.get(id);
        if (link == null || link.peer != peer || link.endpoint != null || peer.failure() != null) {
            return;
        }
        LOG.log(System.Logger.Level.DEBUG, peer.address() + " refused " + link + ": " + reason);
        Link first = peer.routes.get(0);
        link.retiredTo = first;
        peer.routes.set(link.route, first);
        peer.links = java.util.Arrays.stream(peer.links).filter(l -> l != link).toArray(Link[]::new);
        if (sharedQueue) {
            sharedGranted -= link.granted;
            link.granted = 0;
        }
        if (link.reserved != null) {
            for (RegisteredBuffer b : link.reserved) {
                b.release();
            }
            link.reserved = null;
        }
        while (!link.queue.isEmpty()) {
            OutboundFrame frame = link.queue.poll();
            link.waiting.decrementAndGet();
            frame.link = first;
            first.waiting.incrementAndGet();
            first.queue.add(frame);
        }
        activate(first);
    }

    /** The application closes {@code peer}: any thread. */
    void closePeer(FabricPeer peer) {
        TransportException cause = new TransportException("peer " + peer.address() + " closed by the application");
        // A connect from now on opens a new peer, as Peer.close() promises, even before the
        // progress thread has torn this one down (it would otherwise return the dying peer).
        peers.remove(peer.address(), peer);
        if (Thread.currentThread() == progress) {
            teardown(peer, cause, true);
        } else if (!closed) {
            command(() -> teardown(peer, cause, true));
        }
    }

    private void peerLost(FabricPeer peer, TransportException cause) {
        if (closed) {
            return;
        }
        command(() -> teardown(peer, cause, true));
    }

    /** This side's eager threshold and doorbell, after the links of a handshake. */
    private void writeAbilities(DataOutputStream out) throws IOException {
        out.writeInt(config.eagerThreshold());
        out.writeUTF(doorbell == null ? "" : doorbell.path());
    }

    /**
     * The peer's: messages to it go eagerly up to the smaller threshold (its receive buffers
     * hold no more), and its doorbell is rung after posting to it where both sides have one.
     */
    private void readAbilities(DataInputStream in, FabricPeer peer) throws IOException {
        int eager = in.readInt();
        if (eager < 0) {
            throw new IOException("bad eager threshold " + eager);
        }
        peer.eagerLimit = Math.min(config.eagerThreshold(), eager);
        String path = in.readUTF();
        peer.doorbell = doorbell == null ? null : Doorbell.open(path);
    }

    static long randomLong() {
        return NONCES.nextLong();
    }

    private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeShort(bytes.length);
        out.write(bytes);
    }

    /** Bytes from a peer not yet authenticated: a claimed length above {@code max} is garbage. */
    private static byte[] readBytes(DataInputStream in, int max) throws IOException {
        int length = in.readUnsignedShort();
        if (length > max) {
            throw new IOException("a field of " + length + " bytes where " + max + " at most belong");
        }
        byte[] bytes = new byte[length];
        in.readFully(bytes);
        return bytes;
    }

    private static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readUnsignedShort()];
        in.readFully(bytes);
        return bytes;
    }

    // ------------------------------------------------------------------------------------------
    // Links (progress thread)

    /**
     * Creates links and sets aside their receive buffers, as many as the receive pool and the
     * endpoint's receive queue allow. A connected endpoint has a queue of its own per link, unless
     * the links share a receive context. On a shared queue (a reliable-datagram endpoint, or the
     * shared receive context) all links share one queue of {@code rx_size} entries:
     * each new link is granted a share of what is left (at least a few credits), and the buffers
     * of links that went away are granted again rather than posted twice.
     */
    private Link[] createLinks(FabricPeer peer, int count) {
        if (linksOpenNow() + count > config.maxLinks()) {
            throw new TransportException("maxLinks (" + config.maxLinks() + ") reached");
        }
        int minimum = ReceiveCredits.RESERVE + 2;
        int want = config.receiveBuffersPerLink() + ReceiveCredits.RESERVE;
        long queue = Math.max(minimum, receiveQueueEntries());
        Link[] made = new Link[count];
        for (int i = 0; i < count; i++) {
            int grant;
            if (sharedQueue) {
                long left = queue - sharedGranted;
                grant = (int) Math.min(want, Math.max(minimum, left / 32));
                if (left < minimum) {
                    throw new TransportException("the shared receive queue (" + queue + " entries) is fully granted to "
                            + linksOpenNow() + " links");
                }
            } else {
                grant = (int) Math.min(want, queue);
            }
            List<RegisteredBuffer> got = new ArrayList<>();
            int toPost = sharedQueue ? (int) Math.max(0, sharedGranted + grant - sharedPosted) : grant;
            while (got.size() < toPost) {
                RegisteredBuffer b = allocator.tryAllocate(PoolKind.RECEIVE, receiveBytes);
                if (b == null) {
                    break;
                }
                got.add(b);
            }
            if (got.size() < toPost && (!sharedQueue ? got.size() : sharedPosted + got.size() - sharedGranted)
                    < minimum) {
                got.forEach(RegisteredBuffer::release);
                for (int j = 0; j < i; j++) {
                    if (made[j].reserved != null) {
                        for (RegisteredBuffer b : made[j].reserved) {
                            b.release();
                        }
                    }
                }
                throw new TransportException("receive pool exhausted (" + config.receivePoolBytes()
                        + " bytes): raise receivePoolBytes or lower receiveBuffersPerLink");
            }
            if (got.size() < toPost) {
                grant = !sharedQueue ? got.size() : (int) (sharedPosted + got.size() - sharedGranted);
            }
            int id;
            do {
                id = NONCES.nextInt() & Integer.MAX_VALUE;
            } while (linksById.containsKey(id));
            Link link = new Link(peer, id, new ReceiveCredits(grant, 0));
            linksById.put(id, link);
            link.granted = grant;
            link.firstGrant = grant;
            link.reserved = got.toArray(RegisteredBuffer[]::new);
            links.add(link);
            made[i] = link;
            if (sharedQueue) {
                // Shared receives are posted before the peer learns of the grant.
                link.endpoint = session.sharedEndpoint();
                for (RegisteredBuffer b : link.reserved) {
                    postReceive(b, link);
                }
                sharedPosted += link.reserved.length;
                sharedGranted += grant;
                // A connected link still needs its endpoint: nothing is left to post on it.
                link.reserved = srx != null ? new RegisteredBuffer[0] : null;
            }
        }
        Link[] all = java.util.Arrays.copyOf(peer.links, peer.links.length + count);
        System.arraycopy(made, 0, all, peer.links.length, count);
        peer.links = all;
        return made;
    }

    /**
     * Entries of a link's receive queue, or of the queue all links share: a shared receive
     * context holds more (65,536 on tcp) than the receive pool fills, so the pool bounds it
     * (buffers come from the allocator's power-of-two size class).
     */
    private long receiveQueueEntries() {
        long entries = session.info().rxSize();
        long buffer = Long.highestOneBit(receiveBytes - 1L) << 1;
        return srx == null ? entries : Math.min(entries, config.receivePoolBytes() / buffer);
    }

    private int linksOpenNow() {
        int n = 0;
        for (Link link : links) {
            if (link.peer.failure() == null && link.retiredTo == null) {
                n++;
            }
        }
        return n;
    }

    private void completeConnector(FabricPeer peer, byte[] fabricAddress, int[] remoteIds, int[] grants) {
        Link[] made = peer.links;
        peer.remoteFabricAddress = fabricAddress;
        for (int i = 0; i < made.length; i++) {
            Link link = made[i];
            link.remoteId = remoteIds[i];
            link.route = i;
            peer.routes.set(i, link);
            link.credits.returned(grants[i]);
        }
        if (type == EndpointType.RDM) {
            FabricSession.Connection connection = session.connect(fabricAddress, 0);
            peer.fabricConnection = connection;
            long handle = connection.peer();
            peer.fabricAddress = handle;
            for (Link link : made) {
                link.address = handle;
                markReady(link);
            }
            return;
        }
        for (Link link : made) {
            connectLink(link, fabricAddress);
        }
    }

    /** Opens a connected endpoint for {@code link}, posts its receives, and asks the peer to accept. */
    private void connectLink(Link link, byte[] fabricAddress) {
        Endpoint ep = session.openEndpointTo(fabricAddress);
        link.endpoint = ep;
        link.address = Fi.ADDR_UNSPEC;
        for (RegisteredBuffer b : link.reserved) {
            postReceive(b, link);
        }
        link.reserved = null;
        ep.connect(fabricAddress, intBytes(link.remoteId));
        connecting++;
    }

    private void acceptLinks(FabricPeer peer, Link[] made, byte[] fabricAddress, int[] grants) {
        for (int i = 0; i < made.length; i++) {
            made[i].credits.returned(grants[i]);
        }
        if (type == EndpointType.RDM) {
            FabricSession.Connection connection = session.connect(fabricAddress, 0);
            peer.fabricConnection = connection;
            long handle = connection.peer();
            peer.fabricAddress = handle;
            for (Link link : made) {
                link.address = handle;
                markReady(link);
            }
        } else {
            connecting += made.length;
        }
    }

    private static byte[] intBytes(int value) {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array();
    }

    private void markReady(Link link) {
        link.ready = true;
        linksOpen++;
        link.peer.ready.complete(null);
        activate(link);
    }

    private void pollEvents() {
        ConnectionEvent event;
        int idleReads = 0;
        while (true) {
            if ((event = session.pollEvent(0)) == null) {
                // Each read accepts one connection of the provider's backlog: read while one waits.
                if (++idleReads > MAX_ACCEPTS || !session.listenerBacklogged()) {
                    return;
                }
                continue;
            }
            try (ConnectionEvent e = event) {
                switch (e.type()) {
                    case CONNREQ -> onConnectRequest(e);
                    case CONNECTED -> {
                        Link link = linkOf(e);
                        if (link != null && !link.ready) {
                            connecting--;
                            markReady(link);
                        }
                    }
                    case SHUTDOWN -> {
                        Link link = linkOf(e);
                        if (link != null) {
                            teardown(link.peer, new TransportException("peer " + link.peer.address()
                                    + " shut the connection down"), true);
                        }
                    }
                    case ERROR -> {
                        Link link = linkOf(e);
                        if (link != null) {
                            teardown(link.peer, new TransportException("connection to " + link.peer.address()
                                    + " failed: " + Errno.name(e.errno()) + " " + e.message()), true);
                        }
                    }
                    default -> { }
                }
            }
        }
    }

    private Link linkOf(ConnectionEvent event) {
        for (Link link : links) {
            // Only live endpoints: a new endpoint may reuse the native address of a closed one.
            if (link.endpoint != null && !link.endpoint.isClosed() && event.concerns(link.endpoint)) {
                return link;
            }
        }
        return null;
    }

    private void onConnectRequest(ConnectionEvent request) {
        byte[] data = request.data();
        int id = data.length >= 4 ? ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN).getInt() : -1;
        Link link = linksById.get(id);
        if (link == null || link.endpoint != null || link.reserved == null || link.peer.failure() != null) {
            providerDrops.drop("refused", "a connection request for unknown link " + id);
            session.reject(request);
            return;
        }
        Endpoint ep = session.openConnectedEndpoint(request.info());
        link.endpoint = ep;
        link.address = Fi.ADDR_UNSPEC;
        for (RegisteredBuffer b : link.reserved) {
            postReceive(b, link);
        }
        link.reserved = null;
        ep.accept();
    }

    // ------------------------------------------------------------------------------------------
    // The progress loop

    private void runProgress() {
        CompletionBatch batch = new CompletionBatch(BATCH);
        int idle = 0;
        try {
            while (!closed) {
                int work = drainCommands();
                work += poll(batch);
                loops++;
                boolean timer = false;
                if ((loops & 63) == 0 || idle > 0) {
                    long now = System.nanoTime();
                    if (now - lastRebalance >= REBALANCE_NANOS) {
                        timer = true;
                        lastRebalance = now;
                        flushCredits();
                        if (sharedQueue) {
                            work += rebalance(now);
                        }
                    }
                }
                if (type == EndpointType.MSG && (connecting > 0 || timer)) {
                    pollEvents();
                }
                if (timer && !quarantine.isEmpty()) {
                    releaseQuarantined();
                }
                work += pump();
                if (work > 0) {
                    long now = System.nanoTime();
                    if (idle > 0) {
                        idleGap += (Math.min(now - lastWork, MAX_GAP_SAMPLE_NANOS) - idleGap) >> 3;
                    }
                    idle = 0;
                    lastWork = now;
                } else {
                    idle = idle(idle, batch);
                }
            }
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.ERROR, "progress thread failed; the transport stops", t);
            for (FabricPeer peer : peers.values()) {
                peer.fail(new TransportException("transport progress failed: " + t, t));
            }
        } finally {
            shutdown(batch);
        }
    }

    /**
     * The idle strategy, by time since the last work. It spins for {@link #SPIN_NANOS}, so that
     * a reply that follows at once costs no wake-up. While work comes in dense bursts (the
     * average idle stretch, {@link #idleGap}, is under {@link #pollBudgetNanos}), it keeps
     * polling, yielding the core between polls, up to that budget: a request-response exchange
     * then never waits for a wake-up. Past that, and at once where work arrives sparsely, it
     * sleeps. Where the completion queue has a wait object that sleeps (tcp, verbs) it blocks in
     * the kernel until a completion arrives, an application thread hands over work ({@link #wake}
     * signals the queue) or the next timer is due, so an idle or lightly loaded process uses no
     * CPU. Where it has none (shm: only polling notices a completion), it waits on its
     * {@link Doorbell}, which peers on this host ring after posting: up to the next timer when
     * nothing else can bring work, one 50 us slice while its own operations are in flight or a
     * peer has no doorbell. Without a doorbell either, it parks in 50 us slices while traffic is
     * recent and in slices of up to 1 ms once the transport is truly idle.
     */
    private int idle(int idle, CompletionBatch batch) {
        long idleNanos = System.nanoTime() - lastWork;
        if (idleNanos < SPIN_NANOS) {
            Thread.onSpinWait();
            return idle + 1;
        }
        if (idleNanos < pollBudgetNanos && idleGap < pollBudgetNanos) {
            Thread.yield();
            return idle + 1;
        }
        boolean busy = window.inFlight() > 0 || readsInFlight > 0 || !pulls.isEmpty() || connecting > 0
                || !repostRetry.isEmpty();
        // Without a wake-up for everything that may come: short slices while traffic is recent.
        long slice = busy || idleNanos < 50_000_000 ? PARK_NANOS
                : Math.min(1_000_000L, PARK_NANOS << Math.min(5, idle / 64));
        parked = true;
        try {
            if (!commands.isEmpty()) {
                return idle + 1;
            }
            if (cq.waitable()) {
                int millis = connecting > 0 || !repostRetry.isEmpty() ? 1 : (int) (REBALANCE_NANOS / 1_000_000L);
                int n = dispatch(batch, sources ? cq.awaitFrom(batch, millis) : cq.await(batch, millis));
                if (n > 0) {
                    return woken();
                }
            } else if (doorbell != null) {
                // A peer's post and an application thread's hand-over ring; completions of our
                // own operations do not, nor does a peer without a doorbell, so while any of
                // those may bring work the wait is one slice. Poll once more after arming.
                doorbell.arm();
                try {
                    if (closed) {
                        return idle + 1;
                    }
                    int n = poll(batch);
                    if (n > 0) {
                        return woken();
                    }
                    if (commands.isEmpty()) {
                        doorbell.await(busy || !everyPeerRings() ? slice : REBALANCE_NANOS);
                    }
                } finally {
                    doorbell.disarm();
                }
            } else {
                LockSupport.parkNanos(slice);
            }
        } finally {
            parked = false;
        }
        return idle + 1;
    }

    /** Work arrived while the thread slept: the idle stretch counts toward {@link #idleGap}. */
    private int woken() {
        long now = System.nanoTime();
        idleGap += (Math.min(now - lastWork, MAX_GAP_SAMPLE_NANOS) - idleGap) >> 3;
        lastWork = now;
        return 0;
    }

    /** Whether every peer rings this side's doorbell after posting to it. */
    private boolean everyPeerRings() {
        for (FabricPeer peer : peers.values()) {
            if (peer.doorbell == null) {
                return false;
            }
        }
        return true;
    }

    private void command(Runnable task) {
        submit(task);
    }

    void submitSend(OutboundFrame frame) {
        submit(frame);
    }

    /**
     * Queues {@code command} for the progress thread and wakes it. While the queue is full the
     * caller waits (back-pressure); the progress thread itself never does. Once the progress
     * thread is gone nothing drains the queue: a send then fails.
     */
    private void submit(Object command) {
        if (Thread.currentThread() == progress) {
            if (!overflow.isEmpty() || !commands.offer(command)) {
                overflow.add(command);
            }
            return;
        }
        while (!commands.offer(command)) {
            if (!progress.isAlive()) {
                if (command instanceof OutboundFrame frame) {
                    failSend(frame, new TransportException("transport closed"));
                }
                return;
            }
            wake();
            LockSupport.parkNanos(PARK_NANOS);
        }
        wake();
    }

    private void wake() {
        if (parked) {
            if (cq.waitable() || doorbell != null) {
                signalProgress();
            } else {
                LockSupport.unpark(progress);
            }
        }
    }

    /**
     * Wakes the progress thread from {@link CompletionQueue#await} or its {@link Doorbell},
     * unless they are closed.
     */
    private void signalProgress() {
        synchronized (cq) {
            if (!queueClosed) {
                if (cq.waitable()) {
                    cq.signal();
                } else if (doorbell != null) {
                    doorbell.ring();
                }
            }
        }
    }

    private <T> T onProgress(Supplier<T> task) {
        if (Thread.currentThread() == progress) {
            return task.get();
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        command(() -> {
            try {
                result.complete(task.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        try {
            return result.get(config.connectTimeoutMillis() + 5_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new TransportException(e.getCause().toString(), e.getCause());
        } catch (TimeoutException | InterruptedException e) {
            throw new TransportException("the progress thread did not answer", e);
        }
    }

    private int drainCommands() {
        int n = 0;
        Object command;
        while (n < 256 && ((command = commands.poll()) != null || (command = overflow.poll()) != null)) {
            n++;
            if (command instanceof OutboundFrame frame) {
                enqueue(frame);
            } else if (command instanceof InboundFrame frame) {
                repost(frame);
            } else {
                ((Runnable) command).run();
            }
        }
        for (int i = repostRetry.size(); i > 0; i--) {
            Object[] pending = repostRetry.poll();
            postReceive((RegisteredBuffer) pending[0], (Link) pending[1]);
        }
        return n;
    }

    private void enqueue(OutboundFrame frame) {
        Link link = frame.link;
        while (link.retiredTo != null) {
            link.waiting.decrementAndGet();
            link = link.retiredTo;
            link.waiting.incrementAndGet();
            frame.link = link;
        }
        if (link.peer.failure() != null) {
            link.waiting.decrementAndGet();
            failSend(frame, link.peer.failure());
            return;
        }
        link.queue.add(frame);
        activate(link);
    }

    private void activate(Link link) {
        if (!link.active) {
            link.active = true;
            active.add(link);
        }
    }

    private int pump() {
        int work = 0;
        for (int i = active.size(); i > 0; i--) {
            Link link = active.poll();
            link.active = false;
            work += pump(link);
            if (!link.queue.isEmpty() || !link.control.isEmpty() || link.credits.shouldReturn()) {
                activate(link);
            }
        }
        work += pull();
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
            if (!postControl(link, frame)) {
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
                    creditStalls.increment();
                }
                break;
            }
            link.creditStalled = false;
            if (!frame.admitted) {
                if (!window.tryAcquire(link, frame.length)) {
                    if (!link.windowStalled) {
                        link.windowStalled = true;
                        windowStalls.increment();
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
        int slot = takeSlot();
        if (slot < 0) {
            return false;
        }
        boolean eager = frame.eager(link.peer.eagerLimit);
        int credits = link.credits.toReturn();
        MemorySegment whole = frame.buffer.segment();
        boolean ok;
        if (eager) {
            MemorySegment header = whole.asSlice(FrameDescriptor.EAGER_OFFSET, FrameDescriptor.HEADER);
            FrameDescriptor.header(header, FrameDescriptor.EAGER, credits, link.remoteId, frame.stream, frame.length, 0);
            ok = link.endpoint.send(whole.address() + FrameDescriptor.EAGER_OFFSET, FrameDescriptor.HEADER + frame.length,
                    frame.buffer.descriptor(), link.address, contexts.context(slot));
        } else {
            if (frame.cookie == 0) {
                frame.cookie = nextCookie++; // once: a send retried after EAGAIN keeps its key
            }
            FrameDescriptor.header(whole, FrameDescriptor.RNDV_REQ, credits, link.remoteId, frame.stream, frame.length,
                    frame.cookie);
            try {
                rendezvousKeys.advertise(frame.cookie, whole, frame.length);
            } catch (FabricException e) {
                releaseSlot(slot);
                window.release(link, frame.length);
                failSend(frame, new TransportException("cannot register a rendezvous payload: " + e.getMessage(), e));
                return true; // consumed: this message failed, the ones behind it may go
            }
            ok = link.endpoint.send(whole.address(), FrameDescriptor.RNDV_REQ_BYTES, frame.buffer.descriptor(),
                    link.address, contexts.context(slot));
        }
        if (!ok) {
            releaseSlot(slot);
            return false;
        }
        link.credits.spent(credits);
        frame.type = eager ? FrameDescriptor.EAGER : FrameDescriptor.RNDV_REQ;
        opKind[slot] = SEND_MESSAGE;
        opTarget[slot] = frame;
        opLink[slot] = link;
        if (eager) {
            eagerSent.increment();
        } else {
            rendezvousSent.increment();
            rendezvousOut.put(frame.cookie, frame);
        }
        return true;
    }

    private boolean postControl(Link link, OutboundFrame frame) {
        return postControl(link, frame.buffer, frame.type, frame.cookie);
    }

    private boolean postControl(Link link, RegisteredBuffer buffer, byte frameType, long cookie) {
        int slot = takeSlot();
        if (slot < 0) {
            return false;
        }
        int credits = link.credits.toReturn();
        MemorySegment header = buffer.segment();
        FrameDescriptor.header(header, frameType, credits, link.remoteId, 0, 0, cookie);
        if (!link.endpoint.send(header.address(), FrameDescriptor.HEADER, buffer.descriptor(), link.address,
                contexts.context(slot))) {
            releaseSlot(slot);
            return false;
        }
        link.credits.spent(credits);
        opKind[slot] = SEND_CONTROL;
        opTarget[slot] = buffer;
        opLink[slot] = link;
        return true;
    }

    /** Posts {@code buffer} for {@code link}, or to the shared receive context (any link, or null). */
    private void postReceive(RegisteredBuffer buffer, Link link) {
        int slot = takeSlot();
        Endpoint ep = link == null ? null : link.endpoint;
        if (slot < 0 || (srx == null && (ep == null || ep.isClosed()))) {
            if (slot >= 0) {
                releaseSlot(slot);
            }
            if (slot < 0) {
                repostRetry.add(new Object[] {buffer, link});
            } else {
                buffer.release();
            }
            return;
        }
        boolean posted = srx != null
                ? srx.recv(buffer.segment().address(), receiveBytes, buffer.descriptor(), contexts.context(slot))
                : ep.recv(buffer.segment().address(), receiveBytes, buffer.descriptor(), Fi.ADDR_UNSPEC,
                        contexts.context(slot));
        if (!posted) {
            releaseSlot(slot);
            repostRetry.add(new Object[] {buffer, link});
            return;
        }
        opKind[slot] = RECV;
        opTarget[slot] = buffer;
        opLink[slot] = sharedQueue ? null : link;
    }

    private void releaseQuarantined() {
        long now = System.nanoTime();
        while (!quarantine.isEmpty() && quarantine.peek()[1] - now < 0) {
            releaseSlot((int) quarantine.poll()[0]);
        }
    }

    private int takeSlot() {
        return freeCount == 0 ? -1 : freeSlots[--freeCount];
    }

    private void releaseSlot(int slot) {
        opKind[slot] = 0;
        opTarget[slot] = null;
        opLink[slot] = null;
        opBytes[slot] = 0;
        freeSlots[freeCount++] = slot;
    }

    // ------------------------------------------------------------------------------------------
    // Completions

    private int poll(CompletionBatch batch) {
        return dispatch(batch, sources ? cq.readFrom(batch) : cq.read(batch));
    }

    /** Handles the {@code n} completions just read into {@code batch}, or the error waiting. */
    private int dispatch(CompletionBatch batch, int n) {
        if (n > 0) {
            batchNanos = System.nanoTime();
        }
        if (n == CompletionQueue.ERROR_AVAILABLE) {
            CompletionError error = cq.readError();
            if (error != null) {
                onError(error);
            }
            return 1;
        }
        for (int i = 0; i < n; i++) {
            int slot = contexts.slot(batch.context(i));
            if (slot < 0) {
                continue;
            }
            switch (opKind[slot]) {
                case RECV -> onReceive(slot, batch.length(i), sources ? batch.source(i) : Fi.ADDR_UNSPEC);
                case SEND_MESSAGE -> onMessageSent(slot);
                case SEND_CONTROL -> onControlSent(slot);
                case READ -> onRead(slot);
                case DEAD -> { }
                default -> LOG.log(System.Logger.Level.WARNING, "completion for an idle context slot " + slot);
            }
        }
        return n;
    }

    private void onReceive(int slot, long received, long source) {
        RegisteredBuffer buffer = (RegisteredBuffer) opTarget[slot];
        Link known = opLink[slot];
        releaseSlot(slot);
        MemorySegment frame = buffer.segment();
        String problem = FrameDescriptor.validate(frame, received, config.eagerThreshold(), config.maxMessageSize());
        int id = received >= FrameDescriptor.HEADER ? FrameDescriptor.link(frame) : -1;
        Link link = known != null ? known : linkById(id);
        if (source != Fi.ADDR_UNSPEC && (link == null || link.address != source)) {
            // A shared endpoint: the sender is who the provider says, whatever the frame claims.
            Link sender = linkFrom(source);
            if (problem == null) {
                problem = "frame names link " + id + " but came from " + (sender == null ? "an unknown peer" : sender);
            }
            link = sender;
        }
        if (problem == null && (link == null || id != link.id)) {
            problem = "frame names link " + id;
        }
        if (link == null) {
            LOG.log(System.Logger.Level.WARNING, "dropped a frame for no link: " + problem);
            postShared(buffer);
            return;
        }
        if (link.peer.failure() != null) {
            recycle(buffer, link);
            return;
        }
        if (problem != null) {
            linkFailure(link, "bad frame: " + problem);
            recycle(buffer, link);
            return;
        }
        link.credits.arrived();
        link.credits.returned(FrameDescriptor.credits(frame));
        activate(link);
        byte kind = FrameDescriptor.type(frame);
        int stream = FrameDescriptor.stream(frame);
        if (kind == FrameDescriptor.EAGER || kind == FrameDescriptor.RNDV_REQ) {
            link.lastArrivalNanos = batchNanos; // messages, not control frames, make a link busy
            link.heard = true;
        }
        switch (kind) {
            case FrameDescriptor.EAGER -> {
                InboundFrame message = eagerFrame(buffer).eager(link, stream, FrameDescriptor.length(frame));
                ArrayDeque<InboundFrame> queue = link.heldBack.isEmpty() ? null : link.heldBack.get(stream);
                if (queue != null) {
                    queue.add(message);
                } else {
                    deliver(message);
                }
            }
            case FrameDescriptor.RNDV_REQ -> {
                InboundFrame message = new InboundFrame(link, stream, null, false, FrameDescriptor.length(frame), null);
                message.remoteAddress = FrameDescriptor.remoteAddress(frame);
                message.remoteKey = FrameDescriptor.remoteKey(frame);
                message.cookie = FrameDescriptor.cookie(frame);
                link.heldBack.computeIfAbsent(stream, s -> new ArrayDeque<>()).add(message);
                pulls.add(message);
                recycle(buffer, link);
            }
            case FrameDescriptor.RNDV_DONE -> {
                long cookie = FrameDescriptor.cookie(frame);
                OutboundFrame sent = rendezvousOut.get(cookie);
                recycle(buffer, link);
                if (sent == null || sent.link != link) {
                    // Another link's transfer stays: its own peer may still be pulling it.
                    linkFailure(link, "rendezvous release for unknown cookie " + cookie);
                    return;
                }
                rendezvousOut.remove(cookie);
                rendezvousKeys.revoke(cookie);
                completeSend(sent);
            }
            case FrameDescriptor.RECLAIM -> {
                int given = link.credits.yieldUpTo((int) FrameDescriptor.cookie(frame), CREDIT_FLOOR);
                recycle(buffer, link);
                RegisteredBuffer b = controlBuffers.poll();
                if (b == null) {
                    linkFailure(link, "out of control buffers");
                    return;
                }
                link.control.add(OutboundFrame.control(link.peer, b, FrameDescriptor.YIELD, given));
            }
            case FrameDescriptor.YIELD -> {
                int given = (int) FrameDescriptor.cookie(frame);
                recycle(buffer, link);
                if (!link.reclaimPending || given > link.credits.window() - CREDIT_FLOOR
                        || given > link.credits.peerHeld()) {
                    linkFailure(link, "gave back " + given + " credits unasked or beyond its grant");
                    return;
                }
                link.reclaimPending = false;
                link.credits.withdrawn(given);
                link.granted -= given;
                sharedGranted -= given;
                creditsReclaimed.add(given);
            }
            default -> recycle(buffer, link); // CREDIT: the header did the work
        }
    }

    /**
     * Every credit owed goes back within a review period, however few: the thresholds of
     * {@link ReceiveCredits#shouldReturn} assume this side counts exactly what the peer holds,
     * and a link must stay live even where that count is off.
     */
    private void flushCredits() {
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            if (link.ready && link.credits.owed() > 0 && link.peer.failure() == null) {
                link.credits.flush();
                activate(link);
            }
        }
    }

    /**
     * Reviews the grants of a shared receive queue: credits go back from links idle for
     * {@link #IDLE_LINK_NANOS} (down to {@link #CREDIT_FLOOR}), and links with recent traffic
     * are granted more, up to {@code receiveBuffersPerLink}, from what no link holds (half of it
     * at a time, so that one busy peer cannot take it all at once). Progress thread.
     */
    private int rebalance(long now) {
        long queue = Math.max(CREDIT_FLOOR, receiveQueueEntries());
        int want = config.receiveBuffersPerLink() + ReceiveCredits.RESERVE;
        int work = 0;
        for (int i = 0, n = links.size(); i < n; i++) {
            Link link = links.get(i);
            // Only links the peer has spoken on: before that, its side may not know the link yet
            // and would drop a grant or a RECLAIM sent to it.
            if (!link.ready || !link.heard || link.peer.failure() != null || link.reclaimPending) {
                continue;
            }
            long quiet = now - link.lastArrivalNanos;
            if (quiet > IDLE_LINK_NANOS && link.granted > CREDIT_FLOOR) {
                // Credits not yet returned are taken back without asking; the rest the peer gives.
                int kept = link.credits.keepOwed(link.granted - CREDIT_FLOOR);
                link.granted -= kept;
                sharedGranted -= kept;
                creditsReclaimed.add(kept);
                int ask = Math.min(link.granted, link.credits.peerHeld()) - CREDIT_FLOOR;
                if (ask <= 0) {
                    continue;
                }
                RegisteredBuffer b = controlBuffers.poll();
                if (b == null) {
                    return work;
                }
                link.reclaimPending = true;
                link.control.add(OutboundFrame.control(link.peer, b, FrameDescriptor.RECLAIM, ask));
                activate(link);
                work++;
            } else if (quiet < ACTIVE_LINK_NANOS && link.granted < want) {
                int extra = (int) Math.min(want - link.granted, (queue - sharedGranted) / 2);
                while (sharedPosted < sharedGranted + extra) {
                    RegisteredBuffer b = allocator.tryAllocate(PoolKind.RECEIVE, receiveBytes);
                    if (b == null) {
                        break;
                    }
                    postShared(b);
                    sharedPosted++;
                }
                extra = (int) Math.min(extra, sharedPosted - sharedGranted);
                if (extra > 0) {
                    sharedGranted += extra;
                    link.granted += extra;
                    link.credits.grant(extra);
                    creditsGranted.add(extra);
                    activate(link);
                    work++;
                }
            }
        }
        return work;
    }

    private Link linkById(int id) {
        Link link = recentLinks[id & (RECENT_LINKS - 1)];
        if (link == null || link.id != id) {
            link = linksById.get(id);
            if (link != null) {
                recentLinks[id & (RECENT_LINKS - 1)] = link;
            }
        }
        return link;
    }

    private Link linkFrom(long source) {
        for (Link link : links) {
            if (link.address == source && link.peer.failure() == null) {
                return link;
            }
        }
        return null;
    }

    /** Reposts a buffer the transport consumed itself, returning its credit. */
    private void recycle(RegisteredBuffer buffer, Link link) {
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

    private void postShared(RegisteredBuffer buffer) {
        if (srx != null) {
            postReceive(buffer, null);
            return;
        }
        if (type != EndpointType.RDM) {
            buffer.release();
            return;
        }
        // Any link object serves to name the shared endpoint.
        Link any = links.isEmpty() ? null : links.getFirst();
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

    private void deliver(InboundFrame message) {
        messagesReceived.increment();
        bytesReceived.add(message.length);
        held.incrementAndGet();
        try {
            handler.onMessage(message.link.peer, new ReceivedMessage(message));
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "message handler threw", e);
        }
    }

    /** An application released {@code message}: any thread. */
    void released(InboundFrame message) {
        held.decrementAndGet();
        if (closed) {
            return; // the memory went with the transport
        }
        if (message.eager) {
            reposts.increment();
            if (Thread.currentThread() == progress) {
                repost(message); // released inside the handler: the credit goes back at once
            } else {
                submit(message);
            }
        } else {
            message.target.release();
        }
    }

    private void repost(InboundFrame message) {
        recycle(message.buffer, message.link);
        activate(message.link);
    }

    private void onMessageSent(int slot) {
        OutboundFrame frame = (OutboundFrame) opTarget[slot];
        releaseSlot(slot);
        if (frame.type == FrameDescriptor.EAGER) {
            completeSend(frame);
        }
    }

    /**
     * The send completed: the message is in the peer's receive buffer (eager) or was pulled
     * (rendezvous). It stays a success even if the peer failed since: it was delivered.
     */
    private void completeSend(OutboundFrame frame) {
        window.release(frame.link, frame.length);
        activate(frame.link);
        messagesSent.increment();
        bytesSent.add(frame.length);
        frame.finish(null);
    }

    private void onControlSent(int slot) {
        RegisteredBuffer buffer = (RegisteredBuffer) opTarget[slot];
        releaseSlot(slot);
        controlBuffers.add(buffer);
    }

    private int pull() {
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
            long chunk = Math.min(config.rendezvousChunkBytes(), message.length - message.requested);
            int slot = takeSlot();
            if (slot < 0) {
                break;
            }
            if (!link.endpoint.read(message.target.segment().address() + message.requested, chunk,
                    message.target.descriptor(), link.address, message.remoteAddress + message.requested,
                    message.remoteKey, contexts.context(slot))) {
                releaseSlot(slot);
                break;
            }
            opKind[slot] = READ;
            opTarget[slot] = message;
            opLink[slot] = link;
            opBytes[slot] = chunk;
            message.requested += chunk;
            readsInFlight++;
            started++;
            if (link.peer.doorbell != null) {
                link.peer.doorbell.ring(); // a provider may need the target to progress the read
            }
            if (message.requested == message.length) {
                pulls.poll();
            }
        }
        return started;
    }

    private void onRead(int slot) {
        InboundFrame message = (InboundFrame) opTarget[slot];
        long chunk = opBytes[slot];
        releaseSlot(slot);
        Link link = message.link;
        if (link.peer.failure() != null) {
            abandonRead(message, chunk);
            return;
        }
        readsInFlight--;
        message.pulled += chunk;
        if (message.pulled < message.length) {
            return;
        }
        message.complete = true;
        RegisteredBuffer b = controlBuffers.poll();
        if (b == null) {
            linkFailure(link, "out of control buffers");
            return;
        }
        link.control.add(OutboundFrame.control(link.peer, b, FrameDescriptor.RNDV_DONE, message.cookie));
        activate(link);
        ArrayDeque<InboundFrame> queue = link.heldBack.get(message.stream);
        while (queue != null && !queue.isEmpty() && queue.peek().complete) {
            deliver(queue.poll());
        }
        if (queue != null && queue.isEmpty()) {
            link.heldBack.remove(message.stream);
        }
    }

    private void onError(CompletionError error) {
        int slot = contexts.slot(error.context());
        if (slot < 0) {
            LOG.log(System.Logger.Level.WARNING, "error completion with an unknown context: " + error);
            return;
        }
        byte kind = opKind[slot];
        if (kind == DEAD) {
            return;
        }
        if (kind == 0) {
            LOG.log(System.Logger.Level.WARNING, "error completion for an idle slot: " + error);
            return;
        }
        Object target = opTarget[slot];
        Link link = opLink[slot];
        long bytes = opBytes[slot];
        releaseSlot(slot);
        switch (kind) {
            case RECV -> {
                if (srx != null && !closed) {
                    // A link closed in the middle of a message: the buffer is the context's again.
                    postShared((RegisteredBuffer) target);
                    return;
                }
                ((RegisteredBuffer) target).release();
                if (link != null && link.peer.failure() == null && !closed) {
                    linkFailure(link, "receive failed: " + error.errnoName() + " " + error.message());
                }
            }
            case SEND_MESSAGE -> {
                OutboundFrame frame = (OutboundFrame) target;
                rendezvousOut.remove(frame.cookie);
                rendezvousKeys.revoke(frame.cookie);
                window.release(link, frame.length);
                frame.free();
                failFuture(frame, new TransportException("send to " + link.peer.address() + " failed: "
                        + error.errnoName() + " " + error.message()));
                linkFailure(link, "send failed: " + error.errnoName() + " " + error.message());
            }
            case SEND_CONTROL -> {
                controlBuffers.add((RegisteredBuffer) target);
                linkFailure(link, "control send failed: " + error.errnoName() + " " + error.message());
            }
            case READ -> {
                abandonRead((InboundFrame) target, bytes);
                linkFailure(link, "rendezvous read failed: " + error.errnoName() + " " + error.message());
            }
            default -> LOG.log(System.Logger.Level.WARNING, "error completion for an idle slot: " + error);
        }
    }

    // ------------------------------------------------------------------------------------------
    // Failure

    private void linkFailure(Link link, String reason) {
        if (link.peer.failure() != null) {
            return;
        }
        linkFailures.increment();
        LOG.log(System.Logger.Level.WARNING, "closing " + link + ": " + reason);
        teardown(link.peer, new TransportException(link + " closed: " + reason), true);
    }

    /** Progress thread: fails a peer, its sends and its links. */
    private void teardown(FabricPeer peer, Throwable cause, boolean notify) {
        boolean first = peer.fail(cause);
        for (Link link : peer.links) {
            if (link.ready) {
                link.ready = false;
                linksOpen--;
            }
            if (sharedQueue && link.granted > 0) {
                sharedGranted -= link.granted;
                link.granted = 0;
            }
            while (!link.queue.isEmpty()) {
                OutboundFrame frame = link.queue.poll();
                link.waiting.decrementAndGet();
                if (frame.admitted) {
                    window.release(link, frame.length);
                }
                failSend(frame, cause);
            }
            while (!link.control.isEmpty()) {
                controlBuffers.add(link.control.poll().buffer);
            }
            for (var queue : link.heldBack.values()) {
                for (InboundFrame message : queue) {
                    if (message.eager) {
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
                for (int slot = 0; slot < SLOTS; slot++) {
                    if (opLink[slot] == link && opKind[slot] != 0) {
                        dropOperation(slot, cause);
                    }
                }
            }
        }
        for (var it = rendezvousOut.values().iterator(); it.hasNext(); ) {
            OutboundFrame frame = it.next();
            if (frame.peer == peer) {
                it.remove();
                rendezvousKeys.revoke(frame.cookie);
                window.release(frame.link, frame.length);
                frame.free();
                failFuture(frame, cause);
            }
        }
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
        peers.remove(peer.address(), peer);
        peer.control.close();
        if (first && notify && !closed) {
            try {
                handler.onPeerClosed(peer, cause);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "onPeerClosed threw", e);
            }
        }
    }

    private void dropOperation(int slot, Throwable cause) {
        byte kind = opKind[slot];
        Object target = opTarget[slot];
        Link link = opLink[slot];
        long bytes = opBytes[slot];
        // A completion may still be queued for it: keep the slot out of use for a while.
        opKind[slot] = DEAD;
        opTarget[slot] = null;
        opLink[slot] = null;
        quarantine.add(new long[] {slot, System.nanoTime() + QUARANTINE_NANOS});
        switch (kind) {
            case RECV -> ((RegisteredBuffer) target).release();
            case SEND_MESSAGE -> {
                OutboundFrame frame = (OutboundFrame) target;
                if (frame.type == FrameDescriptor.EAGER) {
                    window.release(link, frame.length);
                    frame.free();
                    failFuture(frame, cause);
                }
            }
            case SEND_CONTROL -> controlBuffers.add((RegisteredBuffer) target);
            case READ -> abandonRead((InboundFrame) target, bytes);
            default -> { }
        }
    }

    /** A chunk of a pull that will not be delivered: the target goes once no read is left on it. */
    private void abandonRead(InboundFrame message, long bytes) {
        readsInFlight--;
        message.pulled += bytes;
        if (message.pulled == message.requested && message.target != null) {
            message.target.release();
            message.target = null;
        }
    }

    private void failSend(OutboundFrame frame, Throwable cause) {
        rendezvousKeys.revoke(frame.cookie);
        frame.free();
        failFuture(frame, cause);
    }

    private static void failFuture(OutboundFrame frame, Throwable cause) {
        frame.finish(cause instanceof TransportException t ? t : new TransportException(cause.getMessage(), cause));
    }

    // ------------------------------------------------------------------------------------------
    // Counters and close

    @Override
    public TransportCounters counters() {
        long credits = 0;
        // Reading credits of links from another thread is a snapshot; the list only grows.
        for (Object link : links.toArray()) {
            credits += ((Link) link).credits.available();
        }
        return new TransportCounters(linksOpen, messagesSent.sum(), messagesReceived.sum(), bytesSent.sum(),
                bytesReceived.sum(), eagerSent.sum(), rendezvousSent.sum(), credits, creditStalls.sum(),
                windowStalls.sum(), window.inFlight(), window.peak(), reposts.sum(), held.get(), linkFailures.sum(),
                creditsGranted.sum(), creditsReclaimed.sum(), authenticationFailures.sum());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        closeQuietly(controlSocket);
        LockSupport.unpark(progress);
        signalProgress();
        try {
            progress.join(10_000);
            acceptor.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Progress thread, on the way out: fails every peer, then frees fabric and memory. */
    private void shutdown(CompletionBatch batch) {
        TransportException cause = new TransportException("transport closed");
        List<FabricPeer> all = new ArrayList<>(peers.values());
        awaitPeersGone(all);
        for (FabricPeer peer : all) {
            teardown(peer, cause, false);
        }
        for (Object command; (command = commands.poll()) != null || (command = overflow.poll()) != null; ) {
            if (command instanceof OutboundFrame frame) {
                failSend(frame, cause);
            }
        }
        synchronized (cq) {
            queueClosed = true;
        }
        rendezvousKeys.close();
        if (doorbell != null) {
            doorbell.close();
        }
        session.close();
        batch.close();
        contexts.close();
        try {
            allocator.close();
        } catch (IllegalStateException e) {
            // Buffers the application still holds: their memory is gone, released later as no-ops.
            LOG.log(System.Logger.Level.DEBUG, "closed with buffers in use: " + e.getMessage());
        }
    }

    /**
     * Tells every peer this side is going (its control channel ends) and waits, a second at
     * most, until each has torn its links to this side down and closed its end. Only then are
     * this side's endpoints and memory freed: a peer still sending into them would otherwise
     * write to memory that is gone (providers such as shm hand a peer in the same process this
     * side's own receive region).
     */
    private void awaitPeersGone(List<FabricPeer> all) {
        for (FabricPeer peer : all) {
            if (peer.established) {
                try {
                    peer.control.socket.shutdownOutput();
                } catch (IOException e) {
                    // the channel is gone already: so is the peer's side of it
                }
            }
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
        for (FabricPeer peer : all) {
            try {
                if (peer.established && !peer.controlEnded.await(Math.max(0, deadline - System.nanoTime()),
                        TimeUnit.NANOSECONDS)) {
                    LOG.log(System.Logger.Level.DEBUG, "closing without a goodbye from " + peer.address());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static void closeQuietly(AutoCloseable closeable) {
        try {
            if (closeable != null) {
                closeable.close();
            }
        } catch (Exception e) {
            // closing anyway
        }
    }

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
            Link link = p.links[0];
            int slot = takeSlot();
            if (slot >= 0 && link.endpoint.send(b.segment().address(), bytes.length, b.descriptor(), link.address,
                    contexts.context(slot))) {
                link.credits.spent(0);
                opKind[slot] = SEND_CONTROL;
                opTarget[slot] = b;
                opLink[slot] = link;
                posted.complete(null);
            } else {
                if (slot >= 0) {
                    releaseSlot(slot);
                }
                submit(attempt[0]); // retry on the next turn, after progress
            }
        };
        command(attempt[0]);
        posted.orTimeout(config.connectTimeoutMillis(), TimeUnit.MILLISECONDS).join();
    }

    /** Whether all links share one receive queue (and {@link #rebalance} moves its credits); for tests. */
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
        return onProgress(rendezvousKeys::counts);
    }

    /** One line per link: its state, credits and queues; for diagnostics. */
    String describeLinks() {
        return onProgress(() -> {
            StringBuilder b = new StringBuilder();
            for (Link link : links) {
                b.append(link).append(link.ready ? " ready" : " down").append(link.peer.failure() != null ? " failed" : "")
                        .append(" granted=").append(link.granted).append(" window=").append(link.credits.window())
                        .append(" peerHeld=").append(link.credits.peerHeld()).append(" owed=").append(link.credits.owed())
                        .append(" available=").append(link.credits.available()).append(" queued=").append(link.queue.size())
                        .append(" control=").append(link.control.size()).append(" reclaimPending=").append(link.reclaimPending)
                        .append(" quietMs=").append((System.nanoTime() - link.lastArrivalNanos) / 1_000_000).append('\n');
            }
            return b.append("shared posted=").append(sharedPosted).append(" granted=").append(sharedGranted).toString();
        });
    }

    @Override
    public String toString() {
        return "fabric transport " + config.provider() + " " + type + " at " + localAddress;
    }
}
