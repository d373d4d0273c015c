package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.admission.DropLog;
import dev.ferry.transport.admission.HandshakeGate;
import dev.ferry.transport.fabric.HandshakeDescriptor.Hello;
import dev.ferry.transport.TransportException.Reason;

/**
 * The TCP side of the transport: dials peers, accepts them, runs the handshake
 * ({@link HandshakeDescriptor}: authentication by the {@link HandshakeAuthenticator}, then fabric
 * addresses and link ids), and hands each established control channel to the
 * {@link ControlChannels} (its reader, heartbeats, the loss of the peer). Its threads (the
 * acceptor, a virtual thread per handshake and per control reader, the heartbeat thread) never
 * call libfabric: what the fabric must do (create, connect, accept or tear down links) they hand
 * to the progress thread through the {@link ProgressProxy} and, where they need the answer, wait
 * for it.
 */
final class ControlPlane implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /**
     * Authenticated handshakes served at once. A connect storm (hundreds of peers starting
     * together) then queues instead of each handshake competing for the progress thread and
     * timing out together. Only peers that proved the secret take or wait for one.
     */
    private static final int CONCURRENT_HANDSHAKES = 16;
    /** A peer that dials again has usually just closed the old channel: how long its end may lag. */
    private static final long REDIAL_GRACE_MILLIS = 200;

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
    /** Deadline, bounds and slots of incoming handshakes. */
    private final HandshakeGate gate;
    private final HandshakeAuthenticator authenticator;
    private final ControlChannels channels;

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
        this.authenticator = new HandshakeAuthenticator(config, gate);
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
        this.channels = new ControlChannels(transport, proxy, peers, routes, socket.getLocalPort());
    }

    void start() {
        acceptor.start();
        channels.start();
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
        return authenticator.failures() + transport.counters.forgedFrames.sum();
    }

    /** Fault injection: stops (or resumes) this side's heartbeats, as a hung process would. */
    void pauseHeartbeats(boolean paused) {
        channels.pauseHeartbeats(paused);
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
            authenticator.toAcceptor(address, in, out);
            peer = new FabricPeer(transport, address, socket, routes);
            FabricPeer p = peer;
            // The first link only: the others open when a stream needs them.
            Link[] created = proxy.call(() -> transport.links.create(p, 1));
            HandshakeDescriptor.writeHello(out, hello(localAddress, created, false));
            Hello answer = HandshakeDescriptor.readAnswer(address, in, created.length);
            applyAbilities(answer, p);
            // Published to the token's holder before the acceptor can send by reference to this side.
            boolean mapsAcceptor = proxy.call(() -> {
                p.mapsOurs = answer.mapsYou();
                return p.memory != null;
            });
            out.writeBoolean(mapsAcceptor); // whether this side maps the acceptor's send slabs
            out.flush();
            peers.put(address, peer);
            proxy.call(() -> {
                transport.links.completeConnector(p, answer.fabricAddress(), answer.linkIds(), answer.tokens(), answer.grants());
                return null;
            });
            awaitReady(peer);
            socket.setSoTimeout(0);
            channels.holdShmRegion(peer);
            peer.established = true;
            channels.startReader(peer);
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
        boolean refused = false;
        try {
            socket.setTcpNoDelay(true);
            socket.setSoTimeout((int) config.connectTimeoutMillis());
            DataInputStream in = new DataInputStream(socket.getInputStream());
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            if (!authenticator.dialer(socket, in, out)) {
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
                    channels.peerLost(previous, new TransportException(Reason.PEER_FAILED, "peer " + address + " connected again"));
                }
                peers.put(address, fresh);
            }
            peer = fresh;
            applyAbilities(hello, fresh);
            Link[] created;
            try {
                created = proxy.call(() -> transport.links.accept(fresh, hello));
            } catch (TransportException e) {
                // Out of the table before the dialer hears: a redial at once must not meet this peer.
                peers.remove(address, fresh);
                refuse(out, e); // the dialer learns why (a limit, an exhausted pool), not just an EOF
                refused = e.reason() == Reason.LIMIT_REACHED || e.reason() == Reason.POOL_EXHAUSTED;
                throw e;
            }
            HandshakeDescriptor.writeAnswer(out, hello(null, created, fresh.memory != null));
            if (in.readBoolean()) { // the dialer maps this side's send slabs: set before its reader starts
                proxy.call(() -> fresh.mapsOurs = true);
            }
            socket.setSoTimeout(0);
            channels.holdShmRegion(peer);
            peer.established = true;
            channels.startReader(peer);
        } catch (IOException | RuntimeException e) {
            if (peer != null) {
                if (refused) {
                    // Expected under load (maxLinks, a fully granted queue): the reason is enough.
                    LOG.log(System.Logger.Level.WARNING, "refused " + peer.address() + " at its handshake: " + e.getMessage());
                } else {
                    LOG.log(System.Logger.Level.WARNING, "handshake with " + peer.address() + " failed", e);
                }
                channels.peerLost(peer, new TransportException(Reason.PEER_FAILED, "handshake with " + peer.address() + " failed: " + e.getMessage(), e));
            } else if (!transport.isClosed()) {
                ticket.failed(e);
            }
            closeQuietly(socket);
        }
    }

    /** Tells the dialer why its links were not made; a failure to say so is kept with {@code why}. */
    private static void refuse(DataOutputStream out, TransportException why) {
        try {
            HandshakeDescriptor.writeRefusal(out, why.getMessage());
        } catch (IOException e) {
            why.addSuppressed(e);
        }
    }

    /** This side's half of a hello: its fabric address, the links just made and its abilities. */
    private Hello hello(String address, Link[] created, boolean mapsYou) {
        int[] ids = new int[created.length];
        int[] tokens = new int[created.length];
        int[] grants = new int[created.length];
        for (int i = 0; i < created.length; i++) {
            ids[i] = created[i].id;
            tokens[i] = created[i].token;
            grants[i] = created[i].firstGrant;
        }
        String prefix = transport.allocator.sharesSendPool() ? transport.allocator.sharedPrefix() : "";
        return new Hello(address, fabricAddress, ids, tokens, grants, config.eagerThreshold(), doorbellPath,
                ProcessHandle.current().pid(), transport.allocator.sharedProbeFd(), prefix, mapsYou);
    }

    /**
     * The peer's abilities: messages to it go eagerly up to the smaller threshold (its receive
     * buffers hold no more), its doorbell is rung after posting to it where both sides have one,
     * and its send slabs are mapped where it shares them and this process may open them.
     */
    private void applyAbilities(Hello hello, FabricPeer peer) {
        peer.eagerLimit = Math.min(config.eagerThreshold(), hello.eagerThreshold());
        peer.doorbell = doorbellPath.isEmpty() ? null : Doorbell.open(hello.doorbellPath());
        peer.memory = PeerMemory.probe(peer.address(), hello.pid(), hello.probeFd(), hello.sharedPrefix());
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
    // The control channel, once established: ControlChannels

    /**
     * Asks the peer to open its end of this side's new link {@code id} on {@code route}: any
     * thread (the progress thread, which must not block on a socket, among them).
     */
    void requestLink(FabricPeer peer, int route, int id, int token, int grant) {
        channels.requestLink(peer, route, id, token, grant);
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
