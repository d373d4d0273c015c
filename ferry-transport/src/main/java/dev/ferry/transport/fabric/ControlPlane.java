package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.security.SecureRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

import dev.ferry.fabric.ShmRegionLocks;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.admission.DropLog;
import dev.ferry.transport.admission.HandshakeGate;
import dev.ferry.transport.fabric.HandshakeDescriptor.Hello;
import dev.ferry.transport.TransportException.Reason;

/**
 * The TCP side of the transport: dials peers, accepts them, runs the handshake
 * ({@link HandshakeDescriptor}: authentication, then fabric addresses and link ids), reads each
 * peer's control channel and sends heartbeats. Its threads (the acceptor, a virtual thread per
 * handshake and per control reader, the heartbeat thread) never call libfabric: what the fabric
 * must do (create, connect, accept or tear down links) they hand to the progress thread through
 * the {@link ProgressProxy} and, where they need the answer, wait for it.
 */
final class ControlPlane implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    private static final SecureRandom NONCES = new SecureRandom();
    /**
     * Authenticated handshakes served at once. A connect storm (hundreds of peers starting
     * together) then queues instead of each handshake competing for the progress thread and
     * timing out together. Only peers that proved the secret take or wait for one.
     */
    private static final int CONCURRENT_HANDSHAKES = 16;
    /** A peer that dials again has usually just closed the old channel: how long its end may lag. */
    private static final long REDIAL_GRACE_MILLIS = 200;
    /** How long a lost shm peer's file lock may take to drop before it is taken for alive. */
    private static final long DEAD_OWNER_WAIT_MILLIS = 2_000;

    private final FabricTransport transport;
    private final TransportConfig config;
    private final ProgressProxy proxy;
    private final ConcurrentHashMap<String, FabricPeer> peers;
    /** This side's fabric address, as the handshake tells peers. */
    private final byte[] fabricAddress;
    /** This side's doorbell path, "" without one. */
    private final String doorbellPath;
    private final int routes;
    private final ServerSocket socket;
    private final String localAddress;
    private final Thread acceptor;
    private final Thread heartbeats;
    /** Deadline, bounds and slots of incoming handshakes. */
    private final HandshakeGate gate;
    private final LongAdder authenticationFailures = new LongAdder();
    /** Fault injection: while set, this side sends no heartbeats (as a hung process would not). */
    private volatile boolean heartbeatsPaused;

    /** Binds the control socket; {@link #start} starts accepting. */
    ControlPlane(FabricTransport transport, ProgressProxy proxy, ConcurrentHashMap<String, FabricPeer> peers,
            byte[] fabricAddress, String doorbellPath, int routes) throws IOException {
        this.transport = transport;
        this.config = transport.config();
        this.proxy = proxy;
        this.peers = peers;
        this.fabricAddress = fabricAddress;
        this.doorbellPath = doorbellPath;
        this.routes = routes;
        this.gate = new HandshakeGate(new DropLog(LOG, "control channel " + config.bindHost()),
                config.handshakeTimeoutMillis(), CONCURRENT_HANDSHAKES, config.connectTimeoutMillis());
        this.socket = new ServerSocket();
        try {
            socket.bind(new InetSocketAddress(InetAddress.getByName(config.bindHost()), config.bindPort()), 1024);
        } catch (IOException | RuntimeException e) {
            socket.close();
            throw e;
        }
        this.localAddress = config.bindHost() + ":" + socket.getLocalPort();
        this.acceptor = Thread.ofPlatform().name("ferry-control-" + socket.getLocalPort()).daemon()
                .unstarted(this::runAcceptor);
        this.heartbeats = Thread.ofPlatform().name("ferry-heartbeat-" + socket.getLocalPort()).daemon()
                .unstarted(this::runHeartbeats);
    }

    void start() {
        acceptor.start();
        heartbeats.start();
    }

    /** host:port of the control socket: this transport's address. */
    String localAddress() {
        return localAddress;
    }

    int port() {
        return socket.getLocalPort();
    }

    /** Incoming handshakes not yet authenticated. */
    int handshakesPending() {
        return gate.pending();
    }

    /** Connections refused at the challenge, and frames dropped for a wrong link token. */
    long authenticationFailures() {
        return authenticationFailures.sum() + transport.counters.forgedFrames.sum();
    }

    /** Fault injection: stops (or resumes) this side's heartbeats, as a hung process would. */
    void pauseHeartbeats(boolean paused) {
        heartbeatsPaused = paused;
    }

    // ------------------------------------------------------------------------------------------
    // Dialing

    /** Connects to the transport at {@code address} (host:port): its first link is up on return. */
    FabricPeer dial(String address) {
        int colon = address.lastIndexOf(':');
        if (colon <= 0) {
            throw new TransportException(Reason.BAD_INPUT, "address must be host:port: " + address);
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
            peer = new FabricPeer(transport, address, socket, routes);
            FabricPeer p = peer;
            // The first link only: the others open when a stream needs them.
            Link[] created = proxy.call(() -> transport.links.create(p, 1));
            HandshakeDescriptor.writeHello(out, hello(localAddress, created));
            Hello answer = HandshakeDescriptor.readAnswer(address, in, created.length);
            applyAbilities(answer, p);
            peers.put(address, peer);
            proxy.call(() -> {
                transport.links.completeConnector(p, answer.fabricAddress(), answer.linkIds(), answer.tokens(), answer.grants());
                return null;
            });
            awaitReady(peer);
            socket.setSoTimeout(0);
            holdShmRegion(peer);
            peer.established = true;
            startControlReader(peer);
            return peer;
        } catch (IOException | RuntimeException e) {
            if (peer != null) {
                peers.remove(address, peer);
                FabricPeer failed = peer;
                TransportException cause = new TransportException(ControlPlane.dialReason(e), "cannot connect to " + address + ": " + e.getMessage(), e);
                failed.fail(cause);
                proxy.run(() -> transport.links.teardown(failed, cause, false));
            }
            closeQuietly(socket);
            if (e instanceof TransportException t) {
                throw t;
            }
            throw new TransportException(ControlPlane.dialReason(e), "cannot connect to " + address + ": " + e, e);
        }
    }

    /** Why a dial failed: the transport's reason where it gave one, else the socket's. */
    static Reason dialReason(Throwable e) {
        return e instanceof java.net.SocketTimeoutException ? Reason.TIMEOUT
                : TransportException.reasonOf(e, Reason.UNREACHABLE);
    }

    /** Waits until {@code peer}'s first link is up, or fails with why it is not. */
    void awaitReady(FabricPeer peer) {
        try {
            peer.ready.get(config.connectTimeoutMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new TransportException(Reason.TIMEOUT, "links to " + peer.address() + " not up within " + config.connectTimeoutMillis()
                    + " ms", e);
        } catch (ExecutionException e) {
            throw new TransportException(TransportException.reasonOf(e.getCause(), Reason.UNREACHABLE), "cannot connect to " + peer.address() + ": " + e.getCause().getMessage(),
                    e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while connecting to " + peer.address(), e);
        }
    }

    /**
     * Dialing side of the challenge: sends a nonce, checks the acceptor's proof of the shared
     * secret, answers with its own. Nothing about this side's fabric is said before it passes.
     */
    private void authenticateToAcceptor(String address, DataInputStream in, DataOutputStream out) throws IOException {
        SharedSecret secret = config.secret();
        byte[] nonce = nonce();
        HandshakeDescriptor.writeGreeting(out, secret != null, nonce);
        HandshakeDescriptor.readStatus(address, in, true);
        byte[] theirNonce = HandshakeDescriptor.readNonce(in);
        byte[] theirProof = HandshakeDescriptor.readBytes(in);
        byte[] proof = new byte[0];
        if (secret != null) {
            if (!secret.verify(theirProof, HandshakeDescriptor.SERVER_LABEL, nonce, theirNonce, 0)) {
                throw new UnauthenticatedException(address + " failed authentication: it does not hold the shared secret");
            }
            proof = secret.proof(HandshakeDescriptor.CLIENT_LABEL, theirNonce, nonce, 0);
        }
        HandshakeDescriptor.writeBytes(out, proof);
    }

    // ------------------------------------------------------------------------------------------
    // Accepting

    private void runAcceptor() {
        while (!transport.isClosed()) {
            Socket accepted;
            try {
                accepted = socket.accept();
            } catch (IOException e) {
                if (!transport.isClosed()) {
                    LOG.log(System.Logger.Level.WARNING, "control channel accept failed", e);
                }
                return;
            }
            HandshakeGate.Ticket ticket = gate.admit(accepted);
            Thread.ofVirtual().name("ferry-handshake").start(() -> {
                try {
                    handshake(accepted, ticket);
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
                return; // dropped at its deadline, or no slot came free: closed and logged
            }
            Hello hello = HandshakeDescriptor.readHello(in, routes);
            String address = hello.address();
            FabricPeer fresh = new FabricPeer(transport, address, socket, routes);
            FabricPeer previous = peers.putIfAbsent(address, fresh);
            if (previous != null && previous.failure() == null && !controlEndsWithin(previous, REDIAL_GRACE_MILLIS)) {
                HandshakeDescriptor.writeRefusal(out, "already connected to " + address);
                closeQuietly(socket);
                return;
            } else if (previous != null) {
                if (previous.failure() == null) {
                    peerLost(previous, new TransportException(Reason.PEER_FAILED, "peer " + address + " connected again"));
                }
                peers.put(address, fresh);
            }
            peer = fresh;
            applyAbilities(hello, fresh);
            Link[] created = proxy.call(() -> transport.links.accept(fresh, hello));
            HandshakeDescriptor.writeAnswer(out, hello(null, created));
            socket.setSoTimeout(0);
            holdShmRegion(peer);
            peer.established = true;
            startControlReader(peer);
        } catch (IOException | RuntimeException e) {
            if (peer != null) {
                LOG.log(System.Logger.Level.WARNING, "handshake with " + peer.address() + " failed", e);
                peerLost(peer, new TransportException(Reason.PEER_FAILED, "handshake with " + peer.address() + " failed: " + e.getMessage(), e));
            } else if (!transport.isClosed()) {
                ticket.failed(e);
            }
            closeQuietly(socket);
        }
    }

    /**
     * Accepting side of the challenge; false (refused, logged, the socket to be closed) unless
     * the dialer proves it holds this side's secret, or neither side has one.
     */
    private boolean authenticateDialer(Socket socket, DataInputStream in, DataOutputStream out) throws IOException {
        HandshakeDescriptor.Greeting greeting = HandshakeDescriptor.readGreeting(in);
        SharedSecret secret = config.secret();
        boolean theirs = greeting.hasSecret();
        byte[] theirNonce = greeting.nonce();
        if (theirs != (secret != null)) {
            return refuse(socket, out, secret != null ? "this side requires the shared secret"
                    : "this side has no shared secret");
        }
        byte[] nonce = nonce();
        HandshakeDescriptor.writeChallenge(out, nonce,
                secret == null ? new byte[0] : secret.proof(HandshakeDescriptor.SERVER_LABEL, theirNonce, nonce, 0));
        byte[] proof;
        try {
            proof = HandshakeDescriptor.readBytes(in, SharedSecret.PROOF_BYTES);
        } catch (IOException e) {
            return refuse(socket, null, "no proof of the shared secret: " + HandshakeGate.reasonOf(e));
        }
        if (secret != null && !secret.verify(proof, HandshakeDescriptor.CLIENT_LABEL, nonce, theirNonce, 0)) {
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
                HandshakeDescriptor.writeRefusal(out, reason);
            } catch (IOException e) {
                // it is gone already
            }
        }
        return false;
    }

    /** This side's half of a hello: its fabric address, the links just made and its abilities. */
    private Hello hello(String address, Link[] created) {
        int[] ids = new int[created.length];
        int[] tokens = new int[created.length];
        int[] grants = new int[created.length];
        for (int i = 0; i < created.length; i++) {
            ids[i] = created[i].id;
            tokens[i] = created[i].token;
            grants[i] = created[i].firstGrant;
        }
        return new Hello(address, fabricAddress, ids, tokens, grants, config.eagerThreshold(), doorbellPath);
    }

    /**
     * The peer's abilities: messages to it go eagerly up to the smaller threshold (its receive
     * buffers hold no more), and its doorbell is rung after posting to it where both sides have one.
     */
    private void applyAbilities(Hello hello, FabricPeer peer) {
        peer.eagerLimit = Math.min(config.eagerThreshold(), hello.eagerThreshold());
        peer.doorbell = doorbellPath.isEmpty() ? null : Doorbell.open(hello.doorbellPath());
    }

    private static byte[] nonce() {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        NONCES.nextBytes(nonce);
        return nonce;
    }

    private static boolean controlEndsWithin(FabricPeer peer, long millis) {
        try {
            return peer.controlEnded.await(millis, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    // ------------------------------------------------------------------------------------------
    // The control channel, once established

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
                        peerLost(peer, new TransportException(Reason.PEER_FAILED, "peer " + peer.address() + " closed its control channel"));
                        return;
                    }
                    case ControlChannel.HEARTBEAT -> { }
                    case ControlChannel.OPEN_LINK -> onOpenLink(peer, in.readInt(), in.readInt(), in.readInt(), in.readInt());
                    case ControlChannel.LINK_OPENED -> {
                        int id = in.readInt();
                        int remoteId = in.readInt();
                        int remoteToken = in.readInt();
                        int grant = in.readInt();
                        proxy.run(() -> transport.links.onLinkOpened(peer, id, remoteId, remoteToken, grant));
                    }
                    case ControlChannel.LINK_REFUSED -> {
                        int id = in.readInt();
                        String reason = in.readUTF();
                        proxy.run(() -> transport.links.onLinkRefused(peer, id, reason));
                    }
                    default -> throw new IOException("unknown control message " + type);
                }
            }
        } catch (java.net.SocketTimeoutException e) {
            peerLost(peer, new TransportException(Reason.PEER_FAILED, "peer " + peer.address() + " sent no heartbeat for "
                    + config.heartbeatTimeoutMillis() + " ms", e));
        } catch (IOException e) {
            peerLost(peer, new TransportException(Reason.PEER_FAILED, "control channel to " + peer.address() + " broke: " + e.getMessage(), e));
        } catch (RuntimeException e) {
            // Whatever ends the reader ends the peer: a peer left open here would never be torn down.
            LOG.log(System.Logger.Level.WARNING, "control reader of " + peer.address() + " failed", e);
            peerLost(peer, new TransportException(Reason.PEER_FAILED, "control channel to " + peer.address() + " failed: " + e, e));
        } finally {
            peer.controlEnded.countDown();
        }
    }

    /** The peer asks for a link of {@code route}: control reader thread. */
    private void onOpenLink(FabricPeer peer, int route, int remoteId, int remoteToken, int grant) throws IOException {
        Link made;
        try {
            if (route < 0 || route >= routes) {
                throw new TransportException(Reason.BAD_INPUT, "no route " + route);
            }
            made = proxy.call(() -> transport.links.openRequested(peer, route, remoteId, remoteToken, grant));
        } catch (TransportException e) {
            peer.control.linkRefused(remoteId, e.getMessage());
            return;
        }
        peer.control.linkOpened(remoteId, made.id, made.token, made.firstGrant);
    }

    /**
     * Asks the peer to open its end of this side's new link {@code id} on {@code route}: any
     * thread (the progress thread, which must not block on a socket, among them).
     */
    void requestLink(FabricPeer peer, int route, int id, int token, int grant) {
        Thread.ofVirtual().name("ferry-open-link").start(() -> {
            try {
                peer.control.openLink(route, id, token, grant);
            } catch (IOException e) {
                peerLost(peer, new TransportException(Reason.PEER_FAILED, "control channel to " + peer.address() + " broke: "
                        + e.getMessage(), e));
            }
        });
    }

    /** Says every peer is alive, unless something else was said within the interval. */
    private void runHeartbeats() {
        long interval = TimeUnit.MILLISECONDS.toNanos(config.heartbeatIntervalMillis());
        while (!transport.isClosed()) {
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
                        peerLost(peer, new TransportException(Reason.PEER_FAILED, "control channel to " + peer.address() + " broke: "
                                + e.getMessage(), e));
                    }
                }
            }
        }
    }

    /** The peer is gone (its channel ended, broke or fell silent): the progress thread tears it down. */
    void peerLost(FabricPeer peer, TransportException cause) {
        if (transport.isClosed()) {
            return;
        }
        byte[] fabricAddress = peer.remoteFabricAddress;
        java.nio.channels.FileChannel region = peer.shmRegion;
        if (fabricAddress != null && region != null) {
            // A peer killed inside shm's progress leaves its region locked, and the progress
            // thread may be spinning on that lock in fi_send right now: it would never reach
            // the teardown below.
            Thread.ofVirtual().name("ferry-shm-lock-check").start(() -> {
                try {
                    ShmRegionLocks.releaseIfOwnerDead(fabricAddress, region, DEAD_OWNER_WAIT_MILLIS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        proxy.run(() -> transport.links.teardown(peer, cause, true));
    }

    /** shm: a handle on the peer's region while it is alive, to release its lock should it die holding it. */
    private void holdShmRegion(FabricPeer peer) {
        byte[] fabricAddress = peer.remoteFabricAddress;
        if (fabricAddress != null && transport.provider().startsWith("shm")) {
            peer.shmRegion = ShmRegionLocks.open(fabricAddress);
        }
    }

    /** Stops accepting; the acceptor ends within {@code millis}. */
    @Override
    public void close() {
        closeQuietly(socket);
    }

    void join(long millis) throws InterruptedException {
        acceptor.join(millis);
    }

    static void closeQuietly(AutoCloseable closeable) {
        try {
            if (closeable != null) {
                closeable.close();
            }
        } catch (Exception e) {
            // closing anyway
        }
    }
}
