package dev.ferry.fabric;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * One provider opened for use: fabric, domain and one completion queue that every endpoint
 * of the session reports to, plus what the endpoint type needs to reach peers: an event queue
 * and a listener for connected ({@link EndpointType#MSG}) endpoints, or one shared endpoint and
 * an address vector for reliable-datagram ({@link EndpointType#RDM}) ones. Connected endpoints
 * may share one {@link SharedReceiveContext}, where the provider offers it. Peers exchange the
 * bytes of {@link #address()} out of band and {@link #connect} with them; a MSG session
 * {@link #accept accepts} the other side.
 *
 * <p>Not thread-safe for set-up; the data calls of its endpoints follow the provider's threading.
 */
public final class FabricSession implements AutoCloseable {

    private final InfoList infos;
    private final FabricInfo info;
    private final Fabric fabric;
    private final Domain domain;
    private final CompletionQueue cq;
    /** The event queue, listener and handshake of a MSG session; null for RDM ones. */
    private final MsgHandshake msg;
    private final Endpoint shared;
    private final AddressVector av;
    /** Where shm parks the addresses of departed peers before removing them; null elsewhere. */
    private final RetiredAddresses retired;
    private final byte[] address;
    /** This session's hold on its shm region (see {@link ShmRegions}); null on other providers. */
    private final OwnerLock region;
    private final List<Connection> connections = new ArrayList<>();

    /** Entries of a reliable-datagram session's address vector (shm's limit on peers). */
    private static final int AV_ENTRIES = 256;

    private FabricSession(InfoList infos, FabricInfo info, int cqSize, boolean listen) {
        this.infos = infos;
        this.info = info;
        Fabric f = Fabric.open(info);
        try {
            this.fabric = f;
            this.domain = f.openDomain(info);
            this.cq = openCompletionQueue(domain, cqSize);
            if (info.endpointType() == EndpointType.MSG) {
                this.msg = new MsgHandshake(info, f, domain, cq, listen);
                this.av = null;
                this.retired = null;
                this.shared = null;
                this.address = msg.address;
                this.region = null;
            } else {
                this.msg = null;
                this.av = domain.openAddressVector(AV_ENTRIES);
                this.shared = domain.openEndpoint(info);
                shared.bind(cq, Fi.TRANSMIT | Fi.RECV);
                shared.bind(av);
                shared.enable();
                this.address = shared.name();
                this.region = info.provider().equals("shm") ? ShmRegions.claim(address) : null;
                this.retired = info.provider().equals("shm") ? new RetiredAddresses(av, AV_ENTRIES) : null;
            }
        } catch (RuntimeException e) {
            f.close();
            infos.close();
            throw e;
        }
    }

    /**
     * A queue with a wait object where the provider offers one, so an idle poller can block in
     * {@link CompletionQueue#await}; a plain queue where it does not.
     */
    private static CompletionQueue openCompletionQueue(Domain domain, int size) {
        try {
            return domain.openCompletionQueue(size, true);
        } catch (FabricException e) {
            return domain.openCompletionQueue(size, false);
        }
    }

    /**
     * Opens {@code provider} with {@code type} endpoints on {@code host}. A MSG session with
     * {@code listen} accepts connections on an ephemeral port of {@code host}.
     *
     * @throws FabricException if no provider matches, naming the hints
     */
    public static FabricSession open(String provider, EndpointType type, String host, boolean listen, int cqSize) {
        return open(provider, type, host, listen, cqSize, false);
    }

    /**
     * {@link #open(String, EndpointType, String, boolean, int)}; with {@code sharedReceive}, the
     * connected endpoints of a MSG session share one {@link #sharedReceiveContext()} where the
     * provider offers it, and have receive queues of their own where it does not.
     */
    public static FabricSession open(String provider, EndpointType type, String host, boolean listen, int cqSize,
            boolean sharedReceive) {
        Objects.requireNonNull(host, "host");
        if (provider != null && provider.startsWith("shm")) {
            ShmRegions.removeOwnLeftovers();
            ShmRegions.removeDeadRegions(ShmRegions.DIRECTORY);
        }
        Hints plain = Hints.of(provider, type);
        // On reliable datagrams, receivers should learn who sent each message (FI_SOURCE and
        // fi_cq_readfrom), so that no peer can speak for another; providers without it still serve.
        Hints[] variants = type == EndpointType.RDM
                ? new Hints[] {new Hints(provider, type, plain.caps() | Fi.SOURCE, plain.mode(), plain.mrMode(),
                        plain.threading(), null, null, false), plain}
                : sharedReceive ? new Hints[] {plain.withSharedReceive(), plain} : new Hints[] {plain};
        // Bind to host: a listener on an ephemeral port, otherwise just the interface, so that
        // network providers stay on the address asked for. Providers without network addresses
        // (shm) match nothing then, and are asked again without one.
        InfoList infos = null;
        for (Hints base : variants) {
            infos = InfoList.query(base.localAddress(host, listen && type == EndpointType.MSG ? "0" : null));
            if (infos.entries().isEmpty() || !socketAddressed(infos.entries().getFirst())) {
                // Not an IP provider: shm, for one, takes the node as the name of its shared
                // region, so every process asking for 127.0.0.1 would collide on one file.
                infos.close();
                infos = InfoList.query(base);
            }
            if (!infos.entries().isEmpty()) {
                break;
            }
            infos.close();
        }
        FabricInfo chosen = infos.entries().stream()
                .filter(i -> provider == null || i.provider().equals(provider) || i.provider().startsWith(provider + ";"))
                .findFirst().orElse(null);
        if (chosen == null) {
            infos.close();
            throw new FabricException("no libfabric provider '" + provider + "' with " + type
                    + " endpoints on this machine (fi_info -p " + provider + " lists what there is)");
        }
        return new FabricSession(infos, chosen, cqSize, listen);
    }

    private static boolean socketAddressed(FabricInfo info) {
        int format = info.addressFormat();
        return format == Fi.SOCKADDR || format == Fi.SOCKADDR_IN || format == Fi.SOCKADDR_IN6
                || format == Fi.SOCKADDR_IB;
    }

    /** The provider's info for this session. */
    public FabricInfo info() {
        return info;
    }

    /** Whether completions of this reliable-datagram session name the sender ({@code FI_SOURCE}). */
    public boolean namesSources() {
        return info.endpointType() == EndpointType.RDM && (info.caps() & Fi.SOURCE) != 0;
    }

    /**
     * The receive context every connected endpoint of this session takes its receives from:
     * post receives here, not on the endpoints. Null where endpoints have queues of their own.
     */
    public SharedReceiveContext sharedReceiveContext() {
        return msg == null ? null : msg.srx;
    }

    /** The domain: register memory here. */
    public Domain domain() {
        return domain;
    }

    /** The completion queue of every endpoint of this session. */
    public CompletionQueue completionQueue() {
        return cq;
    }

    /** The bytes a peer passes to {@link #connect}: the listener's or the shared endpoint's name. */
    public byte[] address() {
        return address.clone();
    }

    /**
     * Connects to the session whose {@link #address()} is {@code peerAddress}, waiting up to
     * {@code timeoutMillis} for a MSG connection to be established.
     *
     * @throws FabricException if the peer refuses or does not answer in time
     */
    public Connection connect(byte[] peerAddress, int timeoutMillis) {
        if (info.endpointType() == EndpointType.RDM) {
            long handle = retired == null ? -1 : retired.revive(peerAddress);
            if (handle < 0) {
                if (retired != null) {
                    retired.makeRoom(connections.size());
                }
                handle = av.insert(peerAddress);
                if (retired != null) {
                    // Only now, so that the slots freed are not the one shm hands out next.
                    retired.purge(System.nanoTime());
                }
            }
            Connection c = new Connection(this, shared, handle, false, peerAddress.clone());
            connections.add(c);
            return c;
        }
        Connection c = new Connection(this, connected().connect(peerAddress, timeoutMillis), Fi.ADDR_UNSPEC, true,
                null);
        connections.add(c);
        return c;
    }

    /**
     * Accepts the next connection request on this listening MSG session, waiting up to
     * {@code timeoutMillis}. Before accepting, {@code beforeAccept} may post receives on the
     * new endpoint, so nothing the peer sends finds the queue empty.
     */
    public Connection accept(int timeoutMillis, java.util.function.Consumer<Endpoint> beforeAccept) {
        if (msg == null || !msg.listening()) {
            throw new IllegalStateException("session is not listening (open it with listen=true and MSG endpoints)");
        }
        Connection c = new Connection(this, msg.accept(timeoutMillis, beforeAccept), Fi.ADDR_UNSPEC, true, null);
        connections.add(c);
        return c;
    }

    /**
     * The next connection event for anything of this session: null if none came within
     * {@code timeoutMillis}; 0 does not wait.
     */
    public ConnectionEvent pollEvent(int timeoutMillis) {
        return msg == null ? null : msg.pollEvent(timeoutMillis);
    }

    /**
     * Whether connections wait in the backlog of this session's listener for the provider to
     * accept them: the provider accepts one per {@link #pollEvent}, so an owner that wants its
     * backlog drained polls events until this says no. False where there is no listener or its
     * socket cannot be seen.
     */
    public boolean listenerBacklogged() {
        return msg != null && msg.listenerBacklogged();
    }

    /**
     * Refuses a connection request that arrived at this session's listener: the provider
     * answers it with a refusal and closes its socket. Without this, a request that is neither
     * accepted nor rejected keeps its socket open for good.
     */
    public void reject(ConnectionEvent request) {
        if (msg == null || !msg.listening()) {
            throw new IllegalStateException("session is not listening");
        }
        msg.reject(request);
    }

    /**
     * Opens a connected endpoint reporting to this session's queues, enabled and ready for
     * receives to be posted: from a connection request's info to accept it, or from this
     * session's info (null) to connect, which verbs refuses: connect with {@link #openEndpointTo}.
     * The caller connects or accepts and owns the endpoint.
     */
    public Endpoint openConnectedEndpoint(FabricInfo request) {
        return connected().openConnectedEndpoint(request);
    }

    /**
     * Opens a connected endpoint to connect to the session whose {@link #address()} is
     * {@code peerAddress}, as {@link #openConnectedEndpoint} does; the caller connects it. The
     * endpoint is made from an info naming the peer as destination: verbs resolves the route
     * when the endpoint is created (without a destination, {@code fi_endpoint} fails with
     * EINVAL) and libfabric 1.17's verbs ignores the address given to {@code fi_connect}.
     */
    public Endpoint openEndpointTo(byte[] peerAddress) {
        return connected().openEndpointTo(peerAddress);
    }

    private MsgHandshake connected() {
        if (msg == null) {
            throw new IllegalStateException("only connected (MSG) sessions open connected endpoints");
        }
        return msg;
    }

    /** How many departed peers' addresses wait in the address vector (shm); 0 elsewhere. */
    int retiredAddresses() {
        return retired == null ? 0 : retired.size();
    }

    /** The shared endpoint of a reliable-datagram session; null for MSG sessions. */
    public Endpoint sharedEndpoint() {
        return shared;
    }

    /**
     * Closes every endpoint, the queues, the domain and the fabric, in that order. The thread
     * that closes must be the only one using the session. On rxm ({@code verbs;ofi_rxm},
     * {@code tcp;ofi_rxm}) it first {@linkplain #quiesce() drains} the completion queue:
     * completions nobody read are discarded.
     */
    @Override
    public void close() {
        try {
            if (layeredOnRxm()) {
                quiesce();
            }
            fabric.close();
        } finally {
            if (region != null) {
                region.close(); // after the endpoint's close removed the region
            }
            infos.close();
        }
    }

    private boolean layeredOnRxm() {
        return shared != null && info.provider().endsWith(";ofi_rxm");
    }

    /** How long the queue must stay empty before rxm connections are closed. */
    private static final long QUIET_NANOS = 50_000_000L;
    /** The longest a drain waits for the queue to stay empty. */
    private static final long QUIESCE_NANOS = 1_000_000_000L;

    /**
     * Reads and discards completions until the queue has been empty for 50 ms, for at most a
     * second, so that rxm has handled everything its connections received before they close.
     * Only for an owner that no longer needs the completions: {@link #close()} calls it.
     *
     * <p>libfabric 1.17's rxm closes a connection's endpoint first and then handles the
     * completions still queued for it: a message or flow-control credit that arrived after the
     * owner's last read is processed against the endpoint just closed (a receive buffer reposted
     * to it, a reply or credit sent on it), and the process dies with SIGSEGV in {@code fi_close}
     * (libfabric fixed the order in later releases: flush, then close). Reading the queue first
     * lets rxm handle those while the connections are alive. What a peer sends after the drain can
     * still hit the window, so owners should make peers stop sending first (a transport closes
     * its control channels, so peers tear their links down) and quiesce last.
     */
    public void quiesce() {
        if (cq.isClosed()) {
            return;
        }
        try (CompletionBatch batch = new CompletionBatch(64)) {
            long start = System.nanoTime();
            long lastSeen = start;
            long now = start;
            while (now - lastSeen < QUIET_NANOS && now - start < QUIESCE_NANOS) {
                int n = cq.read(batch);
                if (n == CompletionQueue.ERROR_AVAILABLE) {
                    cq.readError();
                    n = 1;
                }
                now = System.nanoTime();
                if (n > 0) {
                    lastSeen = now;
                } else {
                    Thread.onSpinWait();
                }
            }
        } catch (RuntimeException e) {
            // Closing anyway: a queue that fails to read has nothing left to hand over.
        }
    }

    /** A reachable peer: an endpoint and the handle to name the peer in data calls. */
    public static final class Connection implements AutoCloseable {
        private final FabricSession session;
        private final Endpoint endpoint;
        private final long peer;
        private final boolean ownsEndpoint;
        /** The peer's address bytes (datagram peers), else null. */
        private final byte[] address;

        Connection(FabricSession session, Endpoint endpoint, long peer, boolean ownsEndpoint, byte[] address) {
            this.session = session;
            this.endpoint = endpoint;
            this.peer = peer;
            this.ownsEndpoint = ownsEndpoint;
            this.address = address;
        }

        /** The endpoint to post on. */
        public Endpoint endpoint() {
            return endpoint;
        }

        /** The peer handle for data calls ({@link Fi#ADDR_UNSPEC} on connected endpoints). */
        public long peer() {
            return peer;
        }

        /**
         * Closes a connected endpoint, or forgets a datagram peer's address. On rxm forgetting
         * closes rxm's connection to the peer, and libfabric 1.17 handles what that connection
         * received only after closing it (see {@link FabricSession#quiesce()}): read the
         * session's queue right before, as a poller that never stops does, or call
         * {@code quiesce()} first where completions may be dropped. This method does not drain
         * the queue itself, since the session's owner may still need its completions. On shm
         * the address leaves the address vector only after a grace period (see
         * {@link RetiredAddresses}): the peer's last frames still name it as their source.
         */
        @Override
        public void close() {
            session.connections.remove(this);
            if (ownsEndpoint) {
                endpoint.close();
            } else if (session.retired != null) {
                session.retired.retire(peer, address, System.nanoTime());
            } else if (!session.av.isClosed()) {
                session.av.remove(peer);
            }
        }
    }
}
