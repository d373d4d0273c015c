package dev.ferry.transport.fabric;

import java.util.Arrays;

import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The links a peer's streams open after the handshake, one per route: this side asks for one
 * ({@link #openRoute}), the peer asks ({@link #openRequested}), the answer comes
 * ({@link #onLinkOpened}) or a refusal moves the route onto the first link ({@link #onLinkRefused}).
 * The links themselves are {@link LinkTable}'s. Token holder only, but for {@link #openRoute}.
 */
final class LinkRoutes {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");

    private final FabricTransport transport;
    private final LinkTable links;

    LinkRoutes(FabricTransport transport, LinkTable links) {
        this.transport = transport;
        this.links = links;
    }

    /**
     * Opens the link of {@code route} to {@code peer}: any thread, on a stream's first use of
     * the route. Blocks for the progress thread's answer (not for the peer's): frames queue on
     * the new link until it is up. Where no further link may open, the route shares route 0.
     */
    Link openRoute(FabricPeer peer, int route) {
        return transport.proxy.call(() -> {
            Link existing = peer.routes.get(route);
            if (existing != null) {
                return existing;
            }
            Link first = peer.routes.get(0);
            Link made;
            try {
                made = links.create(peer, 1)[0];
            } catch (TransportException e) {
                LOG.log(System.Logger.Level.DEBUG, "route " + route + " to " + peer.address() + " shares "
                        + first + ": " + e.getMessage());
                peer.routes.set(route, first);
                return first;
            }
            made.route = route;
            peer.routes.set(route, made);
            transport.control.requestLink(peer, route, made.id, made.token, made.granted);
            return made;
        });
    }

    /** The peer asks for a link of {@code route} (checked by the caller). */
    Link openRequested(FabricPeer peer, int route, int remoteId, int remoteToken, int grant) {
        assert transport.holdsFabric();
        if (peer.failure() != null) {
            throw new TransportException(Reason.PEER_FAILED, "no route " + route);
        }
        Link link = links.create(peer, 1)[0];
        link.remoteId = remoteId;
        link.remoteToken = remoteToken;
        link.route = route;
        link.credits.returned(grant);
        // A route this side has not opened itself sends on the peer's link.
        peer.routes.compareAndSet(route, null, link);
        links.expectConnection(); // the peer's connection request comes next
        return link;
    }

    /** The peer accepted a link this side asked for. */
    void onLinkOpened(FabricPeer peer, int id, int remoteId, int remoteToken, int grant) {
        assert transport.holdsFabric();
        Link link = links.made(id);
        if (link == null || link.peer != peer || link.endpoint != null || link.retiredTo != null) {
            links.linkFailure(peer.links[0], "the peer opened unknown link " + id);
            return;
        }
        if (peer.failure() != null) {
            return;
        }
        link.remoteId = remoteId;
        link.remoteToken = remoteToken;
        link.credits.returned(grant);
        links.connectLink(link, peer.remoteFabricAddress);
    }

    /**
     * The peer refused a link this side asked for (its {@code maxLinks} or receive pool). The
     * route shares the first link, and what queued on the refused one moves there, in order.
     */
    void onLinkRefused(FabricPeer peer, int id, String reason) {
        assert transport.holdsFabric();
        Link link = links.made(id);
        if (link == null || link.peer != peer || link.endpoint != null || peer.failure() != null) {
            return;
        }
        LOG.log(System.Logger.Level.DEBUG, peer.address() + " refused " + link + ": " + reason);
        Link first = peer.routes.get(0);
        link.retiredTo = first;
        peer.routes.set(link.route, first);
        peer.links = Arrays.stream(peer.links).filter(l -> l != link).toArray(Link[]::new);
        transport.credits.withdraw(link);
        link.freeReserved();
        while (!link.queue.isEmpty()) {
            OutboundFrame frame = link.queue.poll();
            link.waiting.decrementAndGet();
            frame.link = first;
            first.waiting.incrementAndGet();
            first.queue.add(frame);
        }
        transport.sends.activate(first);
    }
}
