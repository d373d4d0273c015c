package dev.ferry.transport.netty;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.flow.ByteWindow;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReferenceArray;
import dev.ferry.transport.TransportException.Reason;

/**
 * A remote transport, known by its listen address whichever side connected. Stream {@code s}
 * always goes over link {@code floorMod(s, linksPerPeer)}, so its order holds; the first link
 * is opened by {@code connect} (or on first use), the others as soon as it is up. A link that either side opened serves both directions; if both opened
 * the same index at once, each side sends on the one it saw first and still receives on both.
 * Any link failing fails the whole peer: recovery belongs to the layer above.
 */
final class NettyPeer implements Peer {

    final NettyTransport transport;
    final ByteWindow window;
    private final String address;
    private final AtomicReferenceArray<NettyLink> slots;
    private final List<NettyLink> links = new ArrayList<>();
    private volatile TransportException failure;
    private volatile boolean established;

    NettyPeer(NettyTransport transport, String address) {
        this.transport = transport;
        this.address = address;
        this.window = new ByteWindow(transport.config().sendWindowBytesPerPeer());
        this.slots = new AtomicReferenceArray<>(transport.config().linksPerPeer());
    }

    @Override
    public String address() {
        return address;
    }

    @Override
    public OutboundMessage allocate(int length) {
        checkOpen();
        return transport.allocate(this, length, true);
    }

    @Override
    public OutboundMessage tryAllocate(int length) {
        checkOpen();
        return transport.allocate(this, length, false);
    }

    @Override
    public CompletableFuture<Void> send(int stream, OutboundMessage message) {
        NettyOutboundMessage outbound = own(message);
        outbound.claim();
        CompletableFuture<Void> future = new CompletableFuture<>();
        try {
            checkOpen();
            PendingSend send = new PendingSend(linkFor(stream), outbound, stream, future);
            send.link.enqueue(send, false);
        } catch (TransportException e) {
            outbound.discard();
            future.completeExceptionally(e);
        }
        return future;
    }

    @Override
    public boolean trySend(int stream, OutboundMessage message) {
        NettyOutboundMessage outbound = own(message);
        checkOpen();
        outbound.claim();
        try {
            PendingSend send = new PendingSend(linkFor(stream), outbound, stream, null);
            if (send.link.enqueue(send, true)) {
                return true;
            }
        } catch (RuntimeException e) {
            outbound.unclaim();
            throw e;
        }
        outbound.unclaim();
        return false;
    }

    @Override
    public boolean isOpen() {
        return failure == null && !transport.isClosed();
    }

    @Override
    public String toString() {
        return "NettyPeer[" + address + (failure != null ? ", failed" : "") + "]";
    }

    /** Whether a link of this peer ever came up (so the application knows the peer). */
    boolean isEstablished() {
        return established;
    }

    void established() {
        established = true;
    }

    TransportException failure() {
        return failure;
    }

    private NettyOutboundMessage own(OutboundMessage message) {
        if (!(message instanceof NettyOutboundMessage outbound) || outbound.transport() != transport) {
            throw new IllegalArgumentException("message was not allocated by this transport");
        }
        return outbound;
    }

    private void checkOpen() {
        TransportException failed = failure;
        if (failed != null) {
            throw new TransportException(TransportException.reasonOf(failed, Reason.PEER_FAILED), "peer " + address + " has failed: " + failed.getMessage(), failed);
        }
        if (transport.isClosed()) {
            throw new TransportException(Reason.CLOSED, "transport " + transport.localAddress() + " is closed");
        }
    }

    /** The link that carries {@code stream}, opening it if needed. */
    NettyLink linkFor(int stream) {
        int index = Math.floorMod(stream, slots.length());
        NettyLink link = slots.get(index);
        return link != null ? link : open(index);
    }

    /** Any usable link, opening the first if there is none. */
    NettyLink anyLink() {
        for (int i = 0; i < slots.length(); i++) {
            NettyLink link = slots.get(i);
            if (link != null) {
                return link;
            }
        }
        return open(0);
    }

    /**
     * Opens every link this peer does not have yet and returns them, to be awaited: {@code
     * connect} does so once the first link is up, so that a stream's first send does not pay a
     * connect and a handshake (with many peers connecting at once that can take longer than the
     * sends themselves), and so that no link is still being opened when the application closes
     * the peer (a late link would reach the other side after the close).
     */
    List<NettyLink> openRemaining() {
        List<NettyLink> opened = new ArrayList<>();
        for (int i = 0; i < slots.length() && isOpen(); i++) {
            if (slots.get(i) == null) {
                opened.add(open(i));
            }
        }
        return opened;
    }

    private synchronized NettyLink open(int index) {
        checkOpen();
        NettyLink link = slots.get(index);
        if (link != null) {
            return link;
        }
        if (!transport.reserveLink()) {
            // At the process-wide link cap: share a link this peer already has, for good.
            for (int i = 0; i < slots.length(); i++) {
                if (slots.get(i) != null) {
                    slots.set(index, slots.get(i));
                    return slots.get(i);
                }
            }
            throw new TransportException(Reason.LIMIT_REACHED, "cannot open a link to " + address + ": the process has "
                    + transport.config().maxLinks() + " links (maxLinks)");
        }
        link = transport.connectLink(this, index);
        links.add(link);
        slots.set(index, link);
        return link;
    }

    /** Files a link the peer opened to us; returns false if this peer has failed meanwhile. */
    synchronized boolean adopt(NettyLink link) {
        if (failure != null) {
            return false;
        }
        links.add(link);
        if (link.index >= 0 && link.index < slots.length()) {
            slots.compareAndSet(link.index, null, link);
        }
        return true;
    }

    @Override
    public void close() {
        fail(new TransportException(Reason.CLOSED, "peer " + address() + " closed by the application"), true);
    }

    /** Fails every pending send, closes every link, and tells the handler (if {@code notify}). */
    void fail(TransportException cause, boolean notify) {
        List<NettyLink> all;
        synchronized (this) {
            if (failure != null) {
                return;
            }
            failure = cause;
            all = new ArrayList<>(links);
        }
        transport.forget(this);
        for (NettyLink link : all) {
            link.fail(cause);
        }
        if (notify && !transport.isClosed()) {
            transport.notifyClosed(this, cause);
        }
    }
}
