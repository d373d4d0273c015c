package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.IOException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import dev.ferry.fabric.ShmRegionLocks;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The control channels once their handshake is done: a reader per peer (a virtual thread) that
 * answers the peer's requests to open links and takes in its answers to ours, the heartbeat
 * thread, and the loss of a peer (its channel ended, broke or fell silent past the heartbeat
 * timeout), which the progress thread then tears down. Like the rest of the {@link ControlPlane}
 * its threads never call libfabric: they go through the {@link ProgressProxy}.
 */
final class ControlChannels {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /** How long a lost shm peer's file lock may take to drop before it is taken for alive. */
    private static final long DEAD_OWNER_WAIT_MILLIS = 2_000;

    private final FabricTransport transport;
    private final TransportConfig config;
    private final ProgressProxy proxy;
    private final ConcurrentHashMap<String, FabricPeer> peers;
    private final int routes;
    private final Thread heartbeats;
    /** Fault injection: while set, this side sends no heartbeats (as a hung process would not). */
    private volatile boolean heartbeatsPaused;
    /** shm: a handle on this process's own region, opened with the first shm peer; closed with the heartbeats. */
    private volatile java.nio.channels.FileChannel ownRegion;
    /** Whether a {@link KilledSenderLock} watch runs: one at a time, so that one abandoned lock is released once. */
    private final java.util.concurrent.atomic.AtomicBoolean watchingOwnLock = new java.util.concurrent.atomic.AtomicBoolean();

    ControlChannels(FabricTransport transport, ProgressProxy proxy, ConcurrentHashMap<String, FabricPeer> peers,
            int routes, int port) {
        this.transport = transport;
        this.config = transport.config();
        this.proxy = proxy;
        this.peers = peers;
        this.routes = routes;
        this.heartbeats = Thread.ofPlatform().name("ferry-heartbeat-" + port).daemon().unstarted(this::runHeartbeats);
    }

    void start() {
        heartbeats.start();
    }

    /** Fault injection: stops (or resumes) this side's heartbeats, as a hung process would. */
    void pauseHeartbeats(boolean paused) {
        heartbeatsPaused = paused;
    }

    /** Starts reading {@code peer}'s established control channel. */
    void startReader(FabricPeer peer) {
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
                        proxy.run(() -> transport.links.routes.onLinkOpened(peer, id, remoteId, remoteToken, grant));
                    }
                    case ControlChannel.LINK_REFUSED -> {
                        int id = in.readInt();
                        String reason = in.readUTF();
                        proxy.run(() -> transport.links.routes.onLinkRefused(peer, id, reason));
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
            made = proxy.call(() -> transport.links.routes.openRequested(peer, route, remoteId, remoteToken, grant));
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
        synchronized (this) {
            ControlPlane.closeQuietly(ownRegion);
            ownRegion = null;
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
            // A peer killed inside shm's progress leaves its own region locked, and the progress
            // thread may be spinning on that lock in fi_send right now: it would never reach the
            // teardown below. One killed inside fi_send to this process leaves this process's own
            // region locked instead.
            Thread.ofVirtual().name("ferry-shm-lock-check").start(() -> {
                try {
                    if (ShmRegionLocks.understood() && ShmRegionLocks.awaitOwnerGone(fabricAddress, DEAD_OWNER_WAIT_MILLIS)) {
                        ShmRegionLocks.releaseDeadOwners(fabricAddress, region);
                        watchOwnLock(peer);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }
        proxy.run(() -> transport.links.teardown(peer, cause, true));
    }

    /**
     * After a peer proven dead: releases this process's own region lock if the peer left it held
     * ({@link KilledSenderLock}). One watch at a time; a death during a watch is covered by it.
     */
    private void watchOwnLock(FabricPeer dead) throws InterruptedException {
        java.nio.channels.FileChannel own = ownRegion;
        if (own == null || !watchingOwnLock.compareAndSet(false, true)) {
            return;
        }
        try {
            KilledSenderLock watch = new KilledSenderLock(own, transport.token());
            if (watch.awaitAbandoned(KilledSenderLock.WATCH_MILLIS) && !transport.isClosed() && ShmRegionLocks.release(own)) {
                LOG.log(System.Logger.Level.WARNING, "released this process's own shm region lock, held without a"
                        + " break after the peer " + dead.address() + " died (fabric token held by " + transport.token().holder()
                        + "): libfabric 1.17 shm leaves it held when a sender is killed inside fi_send");
            }
        } finally {
            watchingOwnLock.set(false);
        }
    }

    /** shm: a handle on the peer's region while it is alive, to release its lock should it die holding it. */
    void holdShmRegion(FabricPeer peer) {
        byte[] fabricAddress = peer.remoteFabricAddress;
        if (fabricAddress != null && transport.provider().startsWith("shm")) {
            peer.shmRegion = ShmRegionLocks.open(fabricAddress);
            synchronized (this) {
                if (ownRegion == null && !transport.isClosed()) {
                    ownRegion = ShmRegionLocks.open(transport.fabricAddress());
                }
            }
        }
    }
}
