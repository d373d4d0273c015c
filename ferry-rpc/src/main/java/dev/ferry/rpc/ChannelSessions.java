package dev.ferry.rpc;

import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import dev.ferry.transport.OutboundMessage;

/**
 * The sessions of one {@link RpcChannel}: connecting with back-off (a handshake per session,
 * {@link ClientHandshake}), heartbeats and the silence that fails a session, the circuit
 * breaker's move to the fallback transport and the probes that move back. A failed session's
 * calls stay pending in the channel and go out again on the next one.
 *
 * <p>Runs on the client's timer thread (upkeep), on virtual threads (connect, probe) and on the
 * transports' threads (failures); the fields below are guarded by this object.
 */
final class ChannelSessions {

    private static final System.Logger LOG = System.getLogger("dev.ferry.rpc.client");

    private final RpcChannel channel;
    private final RpcClient client;
    private final String primaryAddress;
    private final String fallbackAddress;
    private final CircuitBreaker breaker;
    private volatile Session current;

    // Guarded by this.
    private boolean connecting;
    private boolean probing;
    private int failedAttempts;
    private long nextAttemptNanos;
    private Throwable lastFailure;

    ChannelSessions(RpcChannel channel, RpcClient client, String primaryAddress, String fallbackAddress,
            CircuitBreaker breaker) {
        this.channel = channel;
        this.client = client;
        this.primaryAddress = primaryAddress;
        this.fallbackAddress = fallbackAddress;
        this.breaker = breaker;
    }

    /** The session calls go out on, or null while there is none. */
    Session current() {
        return current;
    }

    /** Why the last session or connect attempt failed, or null. */
    synchronized Throwable lastFailure() {
        return lastFailure;
    }

    /** Heartbeat, silence check, reconnect or probe as due; on the timer thread. */
    void maintain(long now) {
        Session s = current;
        if (s != null && s.live()) {
            long silence = now - s.lastHeardNanos;
            if (silence > TimeUnit.MILLISECONDS.toNanos(client.config.failureTimeoutMillis())) {
                sessionFailed(s, new RpcException("nothing heard from " + RpcChannel.peerName(s) + " for "
                        + TimeUnit.NANOSECONDS.toMillis(silence) + " ms (failure timeout "
                        + client.config.failureTimeoutMillis() + " ms)"));
            } else if (now - s.lastPingNanos >= TimeUnit.MILLISECONDS.toNanos(client.config.heartbeatIntervalMillis())) {
                s.lastPingNanos = now;
                ping(s);
            }
        }
        boolean connectNow = false;
        boolean useFallback = false;
        boolean probeNow = false;
        synchronized (this) {
            s = current;
            if ((s == null || s.dead()) && !connecting && now - nextAttemptNanos >= 0 && client.tryConnectToken(now)) {
                connecting = true;
                connectNow = true;
                useFallback = fallbackAddress != null && breaker.isOpen();
            } else if (s != null && s.live() && s.fallback && !probing && breaker.probeDue(now)) {
                probing = true;
                probeNow = true;
            }
        }
        if (connectNow) {
            boolean fb = useFallback;
            Thread.ofVirtual().name("ferry-rpc-connect").start(() -> connect(fb));
        } else if (probeNow) {
            Thread.ofVirtual().name("ferry-rpc-probe").start(this::probe);
        }
    }

    private void ping(Session s) {
        OutboundMessage message;
        try {
            message = s.peer.tryAllocate(RpcDescriptor.HEADER);
        } catch (RuntimeException e) {
            sessionFailed(s, e);
            return;
        }
        if (message == null) {
            return; // the send pool is busy, so traffic is flowing: the next tick tries again
        }
        RpcDescriptor.write(message.segment(), RpcDescriptor.PING, (byte) 0, 0, client.clientId, 0, 0,
                channel.ackWatermark());
        s.peer.send(RpcClient.CONTROL_STREAM, message).whenComplete((v, e) -> {
            if (e != null) {
                sessionFailed(s, e);
            }
        });
    }

    /** After this process stalled, the silence of the server is not its fault. */
    void forgiveSilence(long now) {
        Session s = current;
        if (s != null) {
            s.lastHeardNanos = now;
        }
    }

    private void connect(boolean useFallback) {
        Session session = null;
        try {
            session = ClientHandshake.open(channel, client, useFallback ? fallbackAddress : primaryAddress, useFallback);
            synchronized (this) {
                connecting = false;
                failedAttempts = 0;
                lastFailure = null;
                current = session;
            }
            if (!useFallback) {
                breaker.success();
            }
            onSessionReady(session);
        } catch (Throwable e) {
            if (session != null) {
                abandon(session, e);
            }
            client.connectFailures.increment();
            long now = System.nanoTime();
            if (!useFallback && fallbackAddress != null && breaker.failure(now)) {
                LOG.log(System.Logger.Level.WARNING, "moving the traffic of " + primaryAddress + " to the fallback "
                        + fallbackAddress + " after repeated fabric failures: " + e.getMessage());
            }
            boolean refused = e instanceof AuthenticationException;
            synchronized (this) {
                connecting = false;
                failedAttempts++;
                lastFailure = e;
                nextAttemptNanos = now + backoffNanos(failedAttempts, refused);
            }
            if (refused) {
                channel.failAll((AuthenticationException) e);
            }
            LOG.log(System.Logger.Level.DEBUG, "connect to " + primaryAddress + " failed: " + e);
        }
    }

    private void probe() {
        Session session = null;
        try {
            session = ClientHandshake.open(channel, client, primaryAddress, false);
            breaker.success();
            LOG.log(System.Logger.Level.INFO, "the fabric to " + primaryAddress + " works again: moving traffic back");
            synchronized (this) {
                current = session;
            }
            onSessionReady(session);
        } catch (Throwable e) {
            if (session != null) {
                abandon(session, e);
            }
            breaker.failure(System.nanoTime());
        } finally {
            synchronized (this) {
                probing = false;
            }
        }
    }

    private void abandon(Session session, Throwable cause) {
        session.markDead(cause);
        client.sessions.remove(session.peer, session);
    }

    private long backoffNanos(int attempts, boolean refused) {
        RpcConfig c = client.config;
        long millis = refused ? c.reconnectMaxMillis()
                : Math.min(c.reconnectMaxMillis(), c.reconnectMinMillis() << Math.min(20, attempts - 1));
        // Full jitter on the upper half: clients that lost one server together do not return in step.
        long jittered = millis / 2 + ThreadLocalRandom.current().nextLong(millis / 2 + 1);
        return TimeUnit.MILLISECONDS.toNanos(jittered);
    }

    /** Sends every pending call that is not in flight on a live session. */
    private void onSessionReady(Session s) {
        channel.resendAll(s);
    }

    /** A session failed: its calls wait for the next session, which is opened at once. */
    void sessionFailed(Session s, Throwable cause) {
        if (!s.markDead(cause)) {
            return;
        }
        client.sessions.remove(s.peer, s);
        boolean wasCurrent;
        synchronized (this) {
            wasCurrent = current == s;
            if (wasCurrent) {
                current = null;
                lastFailure = cause;
                nextAttemptNanos = System.nanoTime();
            }
        }
        if (!s.ready) {
            return; // a handshake in progress: its connect attempt counts the failure
        }
        client.sessionFailures.increment();
        if (!s.fallback && fallbackAddress != null && breaker.failure(System.nanoTime())) {
            LOG.log(System.Logger.Level.WARNING, "moving the traffic of " + primaryAddress + " to the fallback "
                    + fallbackAddress + " after repeated fabric failures: " + cause.getMessage());
        }
        if (wasCurrent) {
            client.kick(channel);
        }
    }
}
