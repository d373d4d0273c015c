package dev.ferry.transport.fabric;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The progress thread's way out of a closed transport: peers told and waited for, then failed
 * with their links, what waits to be sent failed, and the fabric and memory freed in the order
 * that leaves nothing pointing at freed memory. Progress thread only, once.
 */
final class TransportShutdown {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");

    private final FabricTransport transport;

    TransportShutdown(FabricTransport transport) {
        this.transport = transport;
    }

    /** Fails every peer, then frees fabric and memory. */
    void run(CompletionBatch batch) {
        assert transport.loop.inProgressThread() && transport.holdsFabric();
        TransportException cause = new TransportException(Reason.CLOSED, "transport closed");
        List<FabricPeer> all = new ArrayList<>(transport.peers.values());
        awaitPeersGone(all);
        for (FabricPeer peer : all) {
            transport.links.teardown(peer, cause, false);
        }
        transport.links.closeOverdue(System.nanoTime(), true); // the endpoints of peers torn down before, with reads in flight
        transport.sends.awaited.releaseLent(0, true);
        transport.links.teardowns.closeMappings(); // also the slabs of messages the application still holds
        for (Object command; (command = transport.proxy.poll()) != null; ) {
            if (command instanceof OutboundFrame frame) {
                transport.sends.outcomes.failSend(frame, cause);
            }
        }
        transport.loop.closeIdler(); // hand-overs from now on: ProgressProxy.failAfterShutdown
        transport.rendezvousKeys.close();
        if (transport.doorbell != null) {
            transport.doorbell.close();
        }
        transport.session.close();
        batch.close();
        transport.callers.close();
        transport.ops.close();
        try {
            transport.allocator.close();
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
}
