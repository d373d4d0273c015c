package dev.ferry.fabric;

import java.util.function.Consumer;

/**
 * The connected ({@link EndpointType#MSG}) side of one {@link FabricSession}: its event queue,
 * listener and shared receive context, the opening of connected endpoints on them, and the
 * connection handshake (connect, accept, reject, events).
 *
 * <p>Created and owned by its session, and no more thread-safe than it: one thread at a time
 * sets up connections and reads the event queue, which nothing else reads. The data calls of the
 * endpoints opened here follow the provider's threading; the session's fabric closes them all.
 */
final class MsgHandshake {

    private final FabricInfo info;
    private final Domain domain;
    private final CompletionQueue cq;
    private final EventQueue eq;
    /** Where every connected endpoint takes its receives from; null where each has its own. */
    final SharedReceiveContext srx;
    /** The listener of a listening session; else null. */
    private final PassiveEndpoint listener;
    /** The listener's name, or no bytes where the session does not listen. */
    final byte[] address;
    /** The provider's listening socket, where it can be found; else null. */
    private final ListenerSocket listenerSocket;

    /** Opens the event queue, then the shared receive context and the listener as asked. */
    MsgHandshake(FabricInfo info, Fabric fabric, Domain domain, CompletionQueue cq, boolean listen) {
        this.info = info;
        this.domain = domain;
        this.cq = cq;
        this.eq = fabric.openEventQueue(64);
        if (info.sharesReceiveContext()) {
            this.srx = domain.openSharedReceiveContext(info.rxSize());
            srx.bind(cq);
        } else {
            this.srx = null;
        }
        if (listen) {
            this.listener = fabric.openPassiveEndpoint(info);
            listener.bind(eq);
            listener.listen();
            this.address = listener.name();
            this.listenerSocket = ListenerSocket.of(address);
        } else {
            this.listener = null;
            this.address = new byte[0];
            this.listenerSocket = null;
        }
    }

    /** Whether the session listens for connections. */
    boolean listening() {
        return listener != null;
    }

    /** {@link FabricSession#connect}, MSG part: the connected endpoint, which the caller owns. */
    Endpoint connect(byte[] peerAddress, int timeoutMillis) {
        Endpoint ep = openEndpointTo(peerAddress);
        try {
            ep.connect(peerAddress);
            awaitEvent(ep, ConnectionEvent.Type.CONNECTED, timeoutMillis, "connect").close();
        } catch (RuntimeException e) {
            ep.close();
            throw e;
        }
        return ep;
    }

    /** {@link FabricSession#accept} on a listening session: the accepted endpoint, which the caller owns. */
    Endpoint accept(int timeoutMillis, Consumer<Endpoint> beforeAccept) {
        try (ConnectionEvent request = awaitEvent(listener, ConnectionEvent.Type.CONNREQ, timeoutMillis, "accept")) {
            Endpoint ep = openShared(request.info());
            try {
                bindAndEnable(ep);
                if (beforeAccept != null) {
                    beforeAccept.accept(ep);
                }
                ep.accept();
                awaitEvent(ep, ConnectionEvent.Type.CONNECTED, timeoutMillis, "accept").close();
            } catch (RuntimeException e) {
                ep.close();
                throw e;
            }
            return ep;
        }
    }

    /** {@link FabricSession#pollEvent}. */
    ConnectionEvent pollEvent(int timeoutMillis) {
        return timeoutMillis <= 0 ? eq.poll() : eq.await(timeoutMillis);
    }

    /** {@link FabricSession#listenerBacklogged}. */
    boolean listenerBacklogged() {
        return listenerSocket != null && listenerSocket.backlogged();
    }

    /** {@link FabricSession#reject} on a listening session. */
    void reject(ConnectionEvent request) {
        listener.reject(request);
    }

    /** {@link FabricSession#openConnectedEndpoint}. */
    Endpoint openConnectedEndpoint(FabricInfo request) {
        return enabledOrClosed(openShared(request == null ? info : request));
    }

    /** {@link FabricSession#openEndpointTo}: from a copy of the info naming the peer as destination. */
    Endpoint openEndpointTo(byte[] peerAddress) {
        long copy = InfoList.copyWithDestination(info, peerAddress);
        try {
            return enabledOrClosed(domain.openEndpoint(new FabricInfo(copy)));
        } finally {
            InfoList.free(copy);
        }
    }

    /**
     * Opens a connected endpoint from {@code from}; with a shared receive context, the info (a
     * connection request's, say) is marked as sharing one first, as verbs needs to create the
     * queue pair on the shared receive queue.
     */
    private Endpoint openShared(FabricInfo from) {
        if (srx != null && !from.sharesReceiveContext()) {
            InfoList.shareReceiveContext(from);
        }
        return domain.openEndpoint(from);
    }

    private void bindAndEnable(Endpoint ep) {
        ep.bind(cq, Fi.TRANSMIT | Fi.RECV);
        ep.bind(eq);
        if (srx != null) {
            ep.bind(srx);
        }
        ep.enable();
    }

    /** {@code ep} bound and enabled, or closed if that failed. */
    private Endpoint enabledOrClosed(Endpoint ep) {
        try {
            bindAndEnable(ep);
            return ep;
        } catch (RuntimeException e) {
            ep.close();
            throw e;
        }
    }

    private ConnectionEvent awaitEvent(FabricObject target, ConnectionEvent.Type type, int timeoutMillis, String what) {
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
        while (true) {
            long left = (deadline - System.nanoTime()) / 1_000_000L;
            if (left <= 0) {
                throw new FabricException(what + " timed out after " + timeoutMillis + " ms waiting for " + type);
            }
            ConnectionEvent event = eq.poll();
            if (event == null) {
                Thread.onSpinWait();
                continue;
            }
            if (event.type() == type && (event.concerns(target) || type == ConnectionEvent.Type.CONNREQ)) {
                return event;
            }
            event.close();
            if (event.type() == ConnectionEvent.Type.ERROR && event.concerns(target)) {
                throw FabricException.of(event.errno(), what + " on " + info.provider());
            }
            if (event.type() == ConnectionEvent.Type.SHUTDOWN && event.concerns(target)) {
                throw new FabricException(what + ": peer shut the connection down");
            }
        }
    }
}
