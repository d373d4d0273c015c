package dev.ferry.rpc;

import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * The calling side: a client id, a primary transport (a fabric) and optionally a fallback
 * (Netty TCP), and one {@link RpcChannel} per server. Thread-safe.
 *
 * <p>A timer thread ticks every channel: it sends heartbeats, declares silent sessions failed,
 * starts reconnects (with back-off, jitter and a client-wide rate limit), probes the fabric of
 * servers whose traffic moved to the fallback, and fires deadlines. Connects and handshakes
 * run on virtual threads; inbound frames are handled on the transports' progress threads,
 * which complete the calls' futures (so dependent stages that block belong on an executor,
 * {@code thenApplyAsync} and friends).
 */
public final class RpcClient implements AutoCloseable {

    /** Stream of heartbeats and handshakes; calls go on the streams after it. */
    static final int CONTROL_STREAM = 0;
    /** Streams the calls spread over, so that links of a peer share the load. */
    static final int CALL_STREAMS = 8;

    private static final SecureRandom RANDOM = new SecureRandom();

    final RpcConfig config;
    final SharedSecret secret;
    final long clientId;
    final Transport primary;
    final Transport fallback;
    final int maxBody;
    final ScheduledThreadPoolExecutor timer;
    /** The calls' deadlines, swept on {@link #timer}. */
    final CallTimeouts deadlines;
    final ConcurrentHashMap<Peer, Session> sessions = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, RpcChannel> channels = new ConcurrentHashMap<>();
    final AtomicLong nextCallId = new AtomicLong(1);
    final AtomicLong nextHandshake = new AtomicLong(1);
    final long handshakeTimeoutMillis;
    private final long tickNanos;
    private long lastTickNanos = System.nanoTime();
    private volatile boolean closed;
    volatile RpcObserver observer = RpcObserver.NONE;

    // Client-wide connect rate limit: a token bucket.
    private double connectTokens;
    private long tokensAtNanos = System.nanoTime();

    final LongAdder calls = new LongAdder();
    final LongAdder succeeded = new LongAdder();
    final LongAdder remoteErrors = new LongAdder();
    final LongAdder timeouts = new LongAdder();
    final LongAdder unavailable = new LongAdder();
    final LongAdder cancelled = new LongAdder();
    final LongAdder resends = new LongAdder();
    final LongAdder sessionsOpened = new LongAdder();
    final LongAdder sessionFailures = new LongAdder();
    final LongAdder connectFailures = new LongAdder();
    final LongAdder fallbackSends = new LongAdder();

    private RpcClient(RpcConfig config, TransportConfig primaryConfig, TransportConfig fallbackConfig,
            TransportOpener opener) {
        this.config = config;
        this.secret = config.secret().resolve();
        long id;
        do {
            id = RANDOM.nextLong();
        } while (id == 0);
        this.clientId = id;
        this.connectTokens = config.reconnectsPerSecond();
        Handler handler = new Handler();
        this.primary = opener.open(authenticated(primaryConfig, secret), handler);
        Transport fb = null;
        if (fallbackConfig != null) {
            try {
                fb = opener.open(authenticated(fallbackConfig, secret), handler);
            } catch (RuntimeException e) {
                primary.close();
                throw e;
            }
        }
        this.fallback = fb;
        this.handshakeTimeoutMillis = Math.max(config.failureTimeoutMillis(), Math.max(primaryConfig.connectTimeoutMillis(),
                fallbackConfig == null ? 0 : fallbackConfig.connectTimeoutMillis()));
        this.maxBody = Math.min(primaryConfig.maxMessageSize(),
                fallbackConfig == null ? Integer.MAX_VALUE : fallbackConfig.maxMessageSize()) - RpcDescriptor.HEADER;
        this.timer = new ScheduledThreadPoolExecutor(1,
                r -> Thread.ofPlatform().daemon().name("ferry-rpc-timer").unstarted(r));
        timer.setRemoveOnCancelPolicy(true);
        this.tickNanos = TimeUnit.MILLISECONDS.toNanos(Math.max(5, Math.min(50, config.heartbeatIntervalMillis() / 4)));
        this.deadlines = new CallTimeouts(timer, channels.values(), tickNanos);
        timer.scheduleWithFixedDelay(this::tick, tickNanos, tickNanos, TimeUnit.NANOSECONDS);
    }

    /** A client on one transport, without fallback. */
    public static RpcClient open(RpcConfig config, TransportConfig primary) {
        return new RpcClient(config, primary, null, TransportOpener.DEFAULT);
    }

    /** A client on a primary transport and a fallback (null for none). */
    public static RpcClient open(RpcConfig config, TransportConfig primary, TransportConfig fallback) {
        return new RpcClient(config, primary, fallback, TransportOpener.DEFAULT);
    }

    /** A client whose transports {@code opener} opens (a decorator, for fault injection). */
    public static RpcClient open(RpcConfig config, TransportConfig primary, TransportConfig fallback,
            TransportOpener opener) {
        return new RpcClient(config, primary, fallback, opener);
    }

    /** The channel to the server at {@code address} on the primary transport, without fallback. */
    public RpcChannel channel(String address) {
        return channel(address, null);
    }

    /**
     * The channel to the server listening at {@code primaryAddress} on the primary transport and
     * at {@code fallbackAddress} (or null) on the fallback; one per primary address. It connects
     * at once, in the background, and stays connected.
     */
    public RpcChannel channel(String primaryAddress, String fallbackAddress) {
        if (closed) {
            throw new IllegalStateException("client closed");
        }
        if (fallbackAddress != null && fallback == null) {
            throw new IllegalArgumentException("a fallback address needs a fallback transport");
        }
        RpcChannel channel = channels.computeIfAbsent(primaryAddress, a -> new RpcChannel(this, a, fallbackAddress));
        channel.maintain(System.nanoTime());
        return channel;
    }

    /** The channels opened so far, one per server. */
    public List<RpcChannel> channels() {
        return List.copyOf(channels.values());
    }

    /** This client's id, the key of its calls in servers' deduplication tables. */
    public long clientId() {
        return clientId;
    }

    /** The primary transport. */
    public Transport primaryTransport() {
        return primary;
    }

    /** The fallback transport, or null. */
    public Transport fallbackTransport() {
        return fallback;
    }

    /** Sends every completed call to {@code observer} (latency metrics); {@link RpcObserver#NONE} stops. */
    public void observe(RpcObserver observer) {
        this.observer = java.util.Objects.requireNonNull(observer, "observer");
    }

    /** The observer set with {@link #observe}, {@link RpcObserver#NONE} by default. */
    public RpcObserver observer() {
        return observer;
    }

    /** A snapshot of the counters. */
    public RpcClientCounters counters() {
        long opened = 0;
        long closedCount = 0;
        for (RpcChannel channel : channels.values()) {
            opened += channel.breaker.opened();
            closedCount += channel.breaker.closed();
        }
        return new RpcClientCounters(calls.sum(), succeeded.sum(), remoteErrors.sum(), timeouts.sum(), unavailable.sum(),
                cancelled.sum(), resends.sum(), sessionsOpened.sum(), sessionFailures.sum(), connectFailures.sum(),
                fallbackSends.sum(), opened, closedCount);
    }

    boolean isClosed() {
        return closed;
    }

    /** Takes a connect token if the client-wide rate allows one now. */
    synchronized boolean tryConnectToken(long nowNanos) {
        double rate = config.reconnectsPerSecond();
        connectTokens = Math.min(rate, connectTokens + (nowNanos - tokensAtNanos) * rate / 1e9);
        tokensAtNanos = nowNanos;
        if (connectTokens >= 1) {
            connectTokens--;
            return true;
        }
        return false;
    }

    /** Runs a channel's maintenance soon, on the timer thread. */
    void kick(RpcChannel channel) {
        if (!closed) {
            try {
                timer.execute(() -> channel.maintain(System.nanoTime()));
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // closing
            }
        }
    }

    private void tick() {
        long now = System.nanoTime();
        // A tick far later than planned means this process stalled (a GC pause, a stopped VM):
        // the silence of the servers meanwhile is ours, not theirs.
        boolean stalled = now - lastTickNanos > TimeUnit.MILLISECONDS.toNanos(config.failureTimeoutMillis()) / 2;
        lastTickNanos = now;
        try {
            deadlines.tick(now);
        } catch (RuntimeException e) {
            System.getLogger("dev.ferry.rpc.client").log(System.Logger.Level.WARNING, "deadline sweep failed", e);
        }
        for (RpcChannel channel : channels.values()) {
            try {
                if (stalled) {
                    channel.forgiveSilence(now);
                }
                channel.maintain(now);
            } catch (RuntimeException e) {
                System.getLogger("dev.ferry.rpc.client").log(System.Logger.Level.WARNING,
                        "maintenance of " + channel.address() + " failed", e);
            }
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        timer.shutdownNow();
        List<RpcChannel> all = new ArrayList<>(channels.values());
        for (RpcChannel channel : all) {
            channel.failAll(new RpcException("client closed"));
        }
        primary.close();
        if (fallback != null) {
            fallback.close();
        }
    }

    /** Inbound frames of both transports: routed to the channel of the session they belong to. */
    private final class Handler implements MessageHandler {

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            Session session = sessions.get(from);
            if (session == null) {
                message.release();
                return;
            }
            session.channel.onFrame(session, message);
        }

        @Override
        public void onPeerClosed(Peer peer, Throwable cause) {
            Session session = sessions.get(peer);
            if (session != null) {
                session.channel.sessionFailed(session, cause);
            }
        }
    }

    /**
     * {@code config} with the RPC secret, unless it names its own: the fabric transport then
     * refuses a peer without it before any fabric address or link, as the RPC handshake does
     * per session after.
     */
    static TransportConfig authenticated(TransportConfig config, SharedSecret secret) {
        return secret == null || config.secret() != null ? config : config.withSecret(secret);
    }
}
