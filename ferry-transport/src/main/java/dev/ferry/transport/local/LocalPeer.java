package dev.ferry.transport.local;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.TransportException.Reason;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.flow.ByteWindow;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * One end of a {@link LocalConnection}, as its transport sees the remote one. Stream {@code s}
 * always goes over link {@code floorMod(s, linksPerPeer)}, so its order holds.
 */
final class LocalPeer implements Peer {

    final LocalTransport transport;
    final ByteWindow window;
    private final String address;
    private final AtomicReferenceArray<LocalLink> links;
    /** Set once, right after construction, before the peer is published. */
    private LocalConnection connection;
    private LocalPeer twin;

    LocalPeer(LocalTransport transport, String address) {
        this.transport = transport;
        this.address = address;
        this.window = new ByteWindow(transport.config().sendWindowBytesPerPeer());
        this.links = new AtomicReferenceArray<>(transport.config().linksPerPeer());
    }

    /** Joins {@code dialer} and {@code acceptor} and opens link 0; before either is published. */
    static LocalConnection join(LocalPeer dialer, LocalPeer acceptor) {
        LocalConnection connection = new LocalConnection(dialer, acceptor);
        dialer.connection = connection;
        acceptor.connection = connection;
        dialer.twin = acceptor;
        acceptor.twin = dialer;
        connection.open(dialer, 0);
        return connection;
    }

    @Override
    public String address() {
        return address;
    }

    LocalPeer twin() {
        return twin;
    }

    LocalConnection connection() {
        return connection;
    }

    LocalLink link(int index) {
        return links.get(index);
    }

    void attach(int index, LocalLink link) {
        links.set(index, link);
        transport.linksOpen.incrementAndGet();
    }

    void share(int index, LocalLink link) {
        links.compareAndSet(index, null, link);
    }

    @Override
    public OutboundMessage allocate(int length) {
        checkUsable(length);
        long deadline = System.nanoTime() + transport.config().connectTimeoutMillis() * 1_000_000L;
        while (true) {
            LocalMessage message = transport.allocate(length, deadline);
            if (message != null) {
                return message;
            }
            checkUsable(length);
            if (System.nanoTime() - deadline >= 0) {
                throw new TransportException(Reason.POOL_EXHAUSTED, "no send buffer of " + length + " bytes for " + address + " within "
                        + transport.config().connectTimeoutMillis() + " ms: the send pool of "
                        + transport.config().sendPoolBytes() + " bytes (sendPoolBytes) is exhausted");
            }
        }
    }

    @Override
    public OutboundMessage tryAllocate(int length) {
        checkUsable(length);
        return transport.tryAllocate(length);
    }

    @Override
    public CompletableFuture<Void> send(int stream, OutboundMessage message) {
        CompletableFuture<Void> future = new CompletableFuture<>();
        submit(stream, own(message), future, null);
        return future;
    }

    @Override
    public void sendAndForget(int stream, OutboundMessage message) {
        submit(stream, own(message), null, null);
    }

    /** {@inheritDoc} With no future made: {@code onDone} runs on the delivering thread, or on this one if the send fails at once. */
    @Override
    public void sendWatched(int stream, OutboundMessage message, BiConsumer<? super Void, ? super Throwable> onDone) {
        submit(stream, own(message), null, Objects.requireNonNull(onDone, "onDone"));
    }

    private void submit(int stream, LocalMessage message, CompletableFuture<Void> future,
            BiConsumer<? super Void, ? super Throwable> watcher) {
        message.claim(this);
        message.stream = stream;
        message.future = future;
        message.watcher = watcher;
        try {
            checkOpen();
            LocalLink link = linkFor(stream);
            message.link = link;
            link.submit(message, false);
        } catch (TransportException e) {
            message.failSend(e);
        }
    }

    @Override
    public boolean trySend(int stream, OutboundMessage message) {
        LocalMessage m = own(message);
        checkOpen();
        LocalLink link = linkFor(stream);
        m.claim(this);
        m.stream = stream;
        m.future = null;
        m.watcher = null;
        m.link = link;
        boolean taken;
        try {
            taken = link.submit(m, true);
        } catch (RuntimeException e) {
            m.unclaim();
            throw e;
        }
        if (!taken) {
            m.unclaim();
        }
        return taken;
    }

    @Override
    public boolean isOpen() {
        return connection.failure() == null && !transport.isClosed();
    }

    @Override
    public void close() {
        connection.fail(new TransportException(Reason.CLOSED, "peer " + address + " closed by the application"), true, true);
    }

    /** The connection failed: fail this end's links, leave the transport, tell the handler if asked. */
    void closed(TransportException cause, boolean notify) {
        transport.forget(this);
        for (int i = 0; i < links.length(); i++) {
            LocalLink link = links.get(i);
            if (link != null && link.index == i) {
                link.fail(cause);
                transport.releaseLink();
                transport.linksOpen.decrementAndGet();
            }
        }
        if (notify) {
            transport.notifyClosed(this, cause);
        }
    }

    /** Receive credits this end holds for sending, summed over its links. */
    long credits() {
        long sum = 0;
        for (int i = 0; i < links.length(); i++) {
            LocalLink link = links.get(i);
            if (link != null && link.index == i) {
                sum += link.credits();
            }
        }
        return sum;
    }

    private LocalLink linkFor(int stream) {
        int index = Math.floorMod(stream, links.length());
        LocalLink link = links.get(index);
        return link != null ? link : connection.open(this, index);
    }

    private LocalMessage own(OutboundMessage message) {
        if (!(message instanceof LocalMessage local) || local.owner() != transport) {
            throw new IllegalArgumentException("message was not allocated by this transport");
        }
        return local;
    }

    private void checkUsable(int length) {
        if (length < 0 || length > transport.config().maxMessageSize()) {
            throw new TransportException(Reason.BAD_INPUT, "message of " + length + " bytes is outside 0.."
                    + transport.config().maxMessageSize() + " (maxMessageSize)");
        }
        checkOpen();
    }

    private void checkOpen() {
        TransportException failed = connection.failure();
        if (failed != null) {
            throw new TransportException(TransportException.reasonOf(failed, Reason.PEER_FAILED), "peer " + address + " has failed: " + failed.getMessage(), failed);
        }
        if (transport.isClosed()) {
            throw new TransportException(Reason.CLOSED, "transport " + transport.localAddress() + " is closed");
        }
    }

    @Override
    public String toString() {
        return "LocalPeer[" + address + (connection.failure() != null ? ", failed" : "") + "]";
    }
}
