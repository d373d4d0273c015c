package dev.ferry.transport.fabric;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import dev.ferry.fabric.ConnectionEvent;
import dev.ferry.fabric.Endpoint;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.Errno;
import dev.ferry.fabric.FabricSession;
import dev.ferry.fabric.Fi;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.events.TransportEvents;
import dev.ferry.transport.TransportException.Reason;
import dev.ferry.transport.admission.DropLog;

/**
 * Every link of the transport: creates them (with their receive buffers and first grant),
 * connects and accepts their endpoints, follows the fabric's connection events, finds the link
 * of an arriving frame; the links a stream's routes open later are {@link LinkRoutes}'s, a
 * peer's teardown is {@link LinkTeardown}'s. Token holder only, but for {@link #all} and the counts.
 */
final class LinkTable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    private static final SecureRandom IDS = new SecureRandom();
    /** Links whose ids a frame's lookup finds without the map: a power of two. */
    private static final int RECENT_LINKS = 256;
    /**
     * Connections the provider's listener accepts per pass of the progress thread at most (one
     * per event-queue read): 64 per 10 ms timer is 6,400 a second while idle, and a flood at
     * the listener delays the data path by 64 reads at most.
     */
    private static final int MAX_ACCEPTS = 64;
    /**
     * The same while this side waits for a peer's connection request ({@link #connecting}): the
     * provider accepts in the kernel's order, so a flood of connect-and-drop ahead of a known
     * link's request is drained at once rather than 64 per pass. Bounded, and only until the
     * expected links are up: a flood with no link expected still costs the data path 64 reads.
     */
    private static final int MAX_ACCEPTS_EXPECTING = 1024;

    private final FabricTransport transport;
    private final TransportConfig config;
    private final FabricSession session;
    /** Connection requests at the provider's own listener refused for naming no link. */
    private final DropLog providerDrops = new DropLog(LOG, "fabric listener");
    private final EndpointType type;
    private final boolean sharedQueue;
    /** Every link made, in order, but those undone at a refused creation; read by other threads for counters. */
    private final List<Link> links = new CopyOnWriteArrayList<>();
    /**
     * Links by id. Ids are random, so that a frame naming a link is also the link's token: on a
     * shared receive context nothing else says which connection a frame came on.
     */
    private final Map<Integer, Link> byId = new HashMap<>();
    /**
     * Links recently named by frames, at their id's low bits: spares boxing the id of each frame
     * for {@link #byId}, which never drops a link, so a hit is what the map would return.
     */
    private final Link[] recent = new Link[RECENT_LINKS];
    /** Connected endpoints waiting for the fabric's CONNREQ or CONNECTED event. */
    private int connecting;
    private volatile int linksOpen;
    final LinkTeardown teardowns;
    /** The links a stream's routes open after the handshake. */
    final LinkRoutes routes;

    LinkTable(FabricTransport transport) {
        this.transport = transport;
        this.config = transport.config;
        this.session = transport.session;
        this.type = transport.type;
        this.sharedQueue = transport.sharedQueue;
        this.teardowns = new LinkTeardown(transport, this);
        this.routes = new LinkRoutes(transport, this);
    }

    /** Every link made so far; a snapshot for other threads. */
    List<Link> all() {
        return links;
    }

    /** Any link, to name the shared endpoint; null before the first. */
    Link any() {
        return links.isEmpty() ? null : links.getFirst();
    }

    int linksOpen() {
        return linksOpen;
    }

    /** Whether connection events are due: endpoints wait for a peer's request or answer. */
    boolean connecting() {
        return connecting > 0;
    }

    // ------------------------------------------------------------------------------------------
    // Making links

    /**
     * Creates links and sets aside their receive buffers, as many as the receive pool and the
     * endpoint's receive queue allow. A connected endpoint has a queue of its own per link, unless
     * the links share a receive context. On a shared queue (a reliable-datagram endpoint, or the
     * shared receive context) all links share one queue of {@code rx_size} entries:
     * each new link is granted a share of what is left (at least a few credits), and the buffers
     * of links that went away are granted again rather than posted twice.
     */
    Link[] create(FabricPeer peer, int count) {
        assert transport.holdsFabric();
        if (linksOpenNow() + count > config.maxLinks()) {
            throw new TransportException(Reason.LIMIT_REACHED, "maxLinks (" + config.maxLinks() + ") reached");
        }
        CreditBalancer credits = transport.credits;
        int minimum = CreditBalancer.CREDIT_FLOOR;
        int want = config.receiveBuffersPerLink() + ReceiveCredits.RESERVE;
        long queue = Math.max(minimum, receiveQueueEntries());
        Link[] made = new Link[count];
        for (int i = 0; i < count; i++) {
            long posted = credits.sharedPosted();
            long granted = credits.sharedGranted();
            int grant;
            if (sharedQueue) {
                long left = queue - granted;
                grant = (int) Math.min(want, Math.max(minimum, left / 32));
                if (left < minimum) {
                    TransportException full = new TransportException(Reason.LIMIT_REACHED, "the shared receive queue (" + queue
                            + " entries) is fully granted to " + linksOpenNow() + " links");
                    unmake(made, i);
                    throw full;
                }
            } else {
                grant = (int) Math.min(want, queue);
            }
            List<RegisteredBuffer> got = new ArrayList<>();
            int toPost = sharedQueue ? (int) Math.max(0, granted + grant - posted) : grant;
            while (got.size() < toPost) {
                RegisteredBuffer b = transport.allocator.tryAllocate(PoolKind.RECEIVE, transport.receiveBytes);
                if (b == null) {
                    break;
                }
                got.add(b);
            }
            if (got.size() < toPost && (!sharedQueue ? got.size() : posted + got.size() - granted) < minimum) {
                got.forEach(RegisteredBuffer::release);
                unmake(made, i);
                throw new TransportException(Reason.POOL_EXHAUSTED, "receive pool exhausted (" + config.receivePoolBytes()
                        + " bytes): raise receivePoolBytes or lower receiveBuffersPerLink");
            }
            if (got.size() < toPost) {
                grant = !sharedQueue ? got.size() : (int) (posted + got.size() - granted);
            }
            int id;
            do {
                id = IDS.nextInt() & Integer.MAX_VALUE;
            } while (byId.containsKey(id));
            Link link = new Link(peer, id, IDS.nextInt(), new ReceiveCredits(grant, 0));
            byId.put(id, link);
            link.granted = grant;
            link.firstGrant = grant;
            link.reserved = got.toArray(RegisteredBuffer[]::new);
            links.add(link);
            made[i] = link;
            if (sharedQueue) {
                // Shared receives are posted before the peer learns of the grant.
                link.endpoint = session.sharedEndpoint();
                for (RegisteredBuffer b : link.reserved) {
                    transport.receives.postReceive(b, link);
                }
                credits.shared(link.reserved.length, grant);
                // A connected link still needs its endpoint: nothing is left to post on it.
                link.reserved = transport.srx != null ? new RegisteredBuffer[0] : null;
            }
        }
        Link[] all = Arrays.copyOf(peer.links, peer.links.length + count);
        System.arraycopy(made, 0, all, peer.links.length, count);
        peer.links = all;
        return made;
    }

    /**
     * Undoes the first {@code n} links of a {@link #create} that failed part way: the peer never
     * learned of them, so they leave the table and their grants are free again. Buffers they
     * posted to a shared queue stay there, counted as posted; those set aside are freed.
     */
    private void unmake(Link[] made, int n) {
        for (int i = 0; i < n; i++) {
            Link link = made[i];
            byId.remove(link.id);
            links.remove(link);
            transport.credits.withdraw(link);
            link.freeReserved();
        }
    }

    /**
     * Entries of a link's receive queue, or of the queue all links share: a shared queue holds
     * what the receive pool fills, if that is less (a shared receive context holds 65,536 on tcp,
     * a reliable-datagram endpoint 1,024 on shm; buffers come from the allocator's power-of-two
     * size class).
     */
    long receiveQueueEntries() {
        long entries = session.info().rxSize();
        long buffer = Long.highestOneBit(transport.receiveBytes - 1L) << 1;
        return sharedQueue ? Math.min(entries, config.receivePoolBytes() / buffer) : entries;
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

    /** The dialer's links, once the acceptor answered with its ids and grants. */
    void completeConnector(FabricPeer peer, byte[] fabricAddress, int[] remoteIds, int[] remoteTokens, int[] grants) {
        assert transport.holdsFabric();
        Link[] made = peer.links;
        peer.remoteFabricAddress = fabricAddress;
        for (int i = 0; i < made.length; i++) {
            Link link = made[i];
            link.remoteId = remoteIds[i];
            link.remoteToken = remoteTokens[i];
            link.route = i;
            peer.routes.set(i, link);
            link.credits.returned(grants[i]);
        }
        if (type == EndpointType.RDM) {
            addressPeer(peer, fabricAddress, made);
            return;
        }
        for (Link link : made) {
            connectLink(link, fabricAddress);
        }
    }

    /** The acceptor's links for a dialer's hello: its connected endpoints come with the dialer's requests. */
    Link[] accept(FabricPeer peer, HandshakeDescriptor.Hello hello) {
        assert transport.holdsFabric();
        int n = hello.links();
        peer.remoteFabricAddress = hello.fabricAddress();
        Link[] made = create(peer, n);
        for (int i = 0; i < n; i++) {
            made[i].remoteId = hello.linkIds()[i];
            made[i].remoteToken = hello.tokens()[i];
            made[i].route = i;
            peer.routes.set(i, made[i]);
            made[i].credits.returned(hello.grants()[i]);
        }
        if (type == EndpointType.RDM) {
            addressPeer(peer, hello.fabricAddress(), made);
        } else {
            connecting += made.length;
        }
        return made;
    }

    /** Reliable datagrams: the peer's address goes into the address vector, and its links are up. */
    private void addressPeer(FabricPeer peer, byte[] fabricAddress, Link[] made) {
        FabricSession.Connection connection = session.connect(fabricAddress, 0);
        peer.fabricConnection = connection;
        long handle = connection.peer();
        peer.fabricAddress = handle;
        for (Link link : made) {
            link.address = handle;
            markReady(link);
        }
    }

    /** Opens a connected endpoint for {@code link}, posts its receives, and asks the peer to accept. */
    void connectLink(Link link, byte[] fabricAddress) {
        Endpoint ep = session.openEndpointTo(fabricAddress);
        link.endpoint = ep;
        link.address = Fi.ADDR_UNSPEC;
        for (RegisteredBuffer b : link.reserved) {
            transport.receives.postReceive(b, link);
        }
        link.reserved = null;
        ep.connect(fabricAddress, ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(link.remoteId).array());
        connecting++;
    }

    private void markReady(Link link) {
        link.ready = true;
        linksOpen++;
        TransportEvents.linkOpened(config.provider(), link.peer.address(), link.id, linksOpen);
        link.peer.ready.complete(null);
        transport.sends.activate(link);
    }

    // ------------------------------------------------------------------------------------------
    // Connection events and lookups

    /** Handles the fabric's connection events (connected endpoints). */
    void pollEvents() {
        assert transport.holdsFabric();
        ConnectionEvent event;
        int idleReads = 0;
        while (true) {
            if ((event = session.pollEvent(0)) == null) {
                // Each read accepts one connection of the provider's backlog: read while one waits.
                if (++idleReads > (connecting > 0 ? MAX_ACCEPTS_EXPECTING : MAX_ACCEPTS) || !session.listenerBacklogged()) {
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
                            teardown(link.peer, new TransportException(Reason.PEER_FAILED, "peer " + link.peer.address()
                                    + " shut the connection down"), true);
                        }
                    }
                    case ERROR -> {
                        Link link = linkOf(e);
                        if (link != null) {
                            teardown(link.peer, new TransportException(Reason.PEER_FAILED, "connection to " + link.peer.address()
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
        Link link = byId.get(id);
        if (link == null || link.endpoint != null || link.reserved == null || link.peer.failure() != null) {
            providerDrops.drop("refused", "a connection request for unknown link " + id);
            session.reject(request);
            return;
        }
        Endpoint ep = session.openConnectedEndpoint(request.info());
        link.endpoint = ep;
        link.address = Fi.ADDR_UNSPEC;
        for (RegisteredBuffer b : link.reserved) {
            transport.receives.postReceive(b, link);
        }
        link.reserved = null;
        ep.accept();
    }

    /** The link made with {@code id}, or null: the map itself, for the control plane's answers. */
    Link made(int id) {
        return byId.get(id);
    }

    /** A peer's connection request for a link made here comes next. */
    void expectConnection() {
        connecting++;
    }

    /** The link a frame names, or null. */
    Link byId(int id) {
        Link link = recent[id & (RECENT_LINKS - 1)];
        if (link == null || link.id != id) {
            link = byId.get(id);
            if (link != null) {
                recent[id & (RECENT_LINKS - 1)] = link;
            }
        }
        return link;
    }

    /** The live link of a shared endpoint's sender, or null. */
    Link from(long source) {
        for (Link link : links) {
            if (link.address == source && link.peer.failure() == null) {
                return link;
            }
        }
        return null;
    }

    // ------------------------------------------------------------------------------------------
    // Failure: LinkTeardown

    /** {@code link} broke (a bad frame, a failed operation): its peer goes with it. */
    void linkFailure(Link link, String reason) {
        teardowns.linkFailure(link, reason);
    }

    /** Fails a peer, its sends and its links; tells the application if {@code notify}. */
    void teardown(FabricPeer peer, Throwable cause, boolean notify) {
        teardowns.teardown(peer, cause, notify);
    }

    /** Whether torn-down links keep their endpoints open until their reads end ({@link LinkTeardown}). */
    boolean closing() {
        return teardowns.closing();
    }

    /** An orphaned read of torn-down {@code link} into {@code message} ended ({@link LinkTeardown#readEnded}). */
    void readEnded(Link link, InboundFrame message, long bytes) {
        teardowns.readEnded(link, message, bytes);
    }

    /** Closes the torn-down links' endpoints whose reads did not end in time; all of them if {@code all}. */
    void closeOverdue(long now, boolean all) {
        teardowns.closeOverdue(now, all);
    }

    /** A ready link went down. */
    void closed(Link link) {
        assert transport.holdsFabric();
        link.ready = false;
        linksOpen--;
    }
}
