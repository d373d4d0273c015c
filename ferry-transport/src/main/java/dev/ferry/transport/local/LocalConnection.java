package dev.ferry.transport.local;

import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The two ends of a connection between transports of this JVM: the dialer's peer and the
 * acceptor's. Links open in pairs (both directions of one index) when either side first sends
 * on a stream of that index; past {@code maxLinks} on either side the index shares link 0 for
 * good, as the other transports do. Any failure fails both ends: recovery belongs above.
 */
final class LocalConnection {

    final LocalPeer dialer;
    final LocalPeer acceptor;
    private volatile TransportException failure;

    LocalConnection(LocalPeer dialer, LocalPeer acceptor) {
        this.dialer = dialer;
        this.acceptor = acceptor;
    }

    TransportException failure() {
        return failure;
    }

    /**
     * Opens link {@code index} in both directions, reserving a link on each transport; returns
     * the link from {@code from}, or link 0's if a transport is at its cap.
     */
    synchronized LocalLink open(LocalPeer from, int index) {
        LocalLink existing = from.link(index);
        if (existing != null) {
            return existing;
        }
        if (failure != null) {
            throw new TransportException(TransportException.reasonOf(failure, Reason.PEER_FAILED), "peer " + from.address() + " has failed: " + failure.getMessage(), failure);
        }
        LocalPeer to = from.twin();
        boolean reserved = index == 0 || from.transport.reserveLink();
        if (reserved && index != 0 && !to.transport.reserveLink()) {
            from.transport.releaseLink();
            reserved = false;
        }
        if (!reserved) {
            from.share(index, from.link(0));
            to.share(index, to.link(0));
            return from.link(0);
        }
        from.attach(index, new LocalLink(from, to, index));
        to.attach(index, new LocalLink(to, from, index));
        return from.link(index);
    }

    /**
     * Fails both ends: queued and in-flight sends fail, later sends throw, both peers leave their
     * transports, and the handlers are told (each side's only if its {@code notify} flag is set).
     */
    void fail(TransportException cause, boolean notifyDialer, boolean notifyAcceptor) {
        synchronized (this) {
            if (failure != null) {
                return;
            }
            failure = cause;
        }
        dialer.closed(cause, notifyDialer);
        acceptor.closed(cause, notifyAcceptor);
    }
}
