package dev.ferry.rpc;

import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

import dev.ferry.transport.Peer;

/** One handshake-authenticated use of a transport peer by a channel; dead once it fails, never reused. */
final class Session {

    final RpcChannel channel;
    final Peer peer;
    final boolean fallback;
    /** This session's handshake number, echoed by the server so that late frames of an abandoned one are ignored. */
    final long handshake;
    /** The server's challenge: its epoch, nonce and proof. */
    final CompletableFuture<byte[]> challenge = new CompletableFuture<>();
    /** The server's verdict: its epoch, or an {@link AuthenticationException}. */
    final CompletableFuture<Long> welcome = new CompletableFuture<>();
    volatile long epoch;
    volatile boolean ready;
    volatile long lastHeardNanos = System.nanoTime();
    /**
     * When the last heartbeat went, first the session's start: the first goes an interval after
     * it (a just-opened session needs no proof of life, and {@code System.nanoTime()} has no
     * fixed origin to count from zero). Timer thread only.
     */
    long lastPingNanos = System.nanoTime();
    /** Fails this session when a send on it fails: one handler for all its calls' sends. */
    final BiConsumer<Void, Throwable> onSendDone = (v, e) -> {
        if (e != null) {
            channel().sessionFailed(this, e);
        }
    };
    private boolean dead;
    private volatile boolean deadFlag;

    Session(RpcChannel channel, Peer peer, boolean fallback, long handshake) {
        this.channel = channel;
        this.peer = peer;
        this.fallback = fallback;
        this.handshake = handshake;
    }

    private RpcChannel channel() {
        return channel;
    }

    boolean dead() {
        return deadFlag;
    }

    boolean live() {
        return ready && !deadFlag;
    }

    /** Marks the session dead; true the first time. */
    synchronized boolean markDead(Throwable cause) {
        if (dead) {
            return false;
        }
        dead = true;
        deadFlag = true;
        challenge.completeExceptionally(cause);
        welcome.completeExceptionally(cause);
        return true;
    }

    @Override
    public String toString() {
        return (fallback ? "fallback" : "primary") + " session to " + peer.address();
    }
}
