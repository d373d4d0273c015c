package dev.ferry.bench.rpc;

import dev.ferry.bench.pingpong.PingPongSpec;
import dev.ferry.transport.TransportConfig;
import java.util.Locale;
import java.util.Objects;

/**
 * What one RPC benchmark run measures, checked on construction so that bad input fails before
 * any process starts.
 *
 * @param provider a libfabric provider ({@code shm}, {@code tcp}, ...) or {@code netty}, the
 *     kernel-TCP baseline
 * @param size request and response body bytes
 * @param concurrency caller threads, each with one call outstanding
 * @param warmupMillis how long the callers run untimed first, at least: the JIT compiles the call
 *     path on both sides meanwhile
 * @param warmupCalls untimed calls made first, at least (over all callers): a call path is hot only
 *     after hundreds of thousands of calls, which a cold pair of JVMs makes at a few thousand a
 *     second; the warm-up waits for them at most {@link #WARMUP_GRACE_MILLIS} past its time
 * @param durationMillis how long the timed part lasts
 * @param timeoutMillis how long to wait for the server to start, and the deadline of each call
 */
public record RpcBenchSpec(String provider, int size, int concurrency, long warmupMillis, long warmupCalls,
        long durationMillis, long timeoutMillis) {

    /** The largest body: a rendezvous-sized payload each way, per caller, stays well inside the default pools. */
    public static final int MAX_SIZE = 16 << 20;
    /** The most caller threads. */
    public static final int MAX_CONCURRENCY = 256;
    /** Untimed calls by default: about a second of calls once the path is compiled. */
    public static final long DEFAULT_WARMUP_CALLS = 200_000;
    /** How long past its time the warm-up waits for its calls at most, on a slow transport or size. */
    public static final long WARMUP_GRACE_MILLIS = 30_000;

    /** Checks the values against each other. */
    public RpcBenchSpec {
        Objects.requireNonNull(provider, "provider");
        provider = provider.toLowerCase(Locale.ROOT);
        if (!provider.equals(PingPongSpec.NETTY) && !PingPongSpec.FABRIC_PROVIDERS.contains(provider)) {
            throw new IllegalArgumentException("unknown transport '" + provider + "' (expected one of "
                    + String.join(", ", PingPongSpec.knownProviders()) + ")");
        }
        if (size < 0) {
            throw new IllegalArgumentException("size must not be negative: " + size);
        }
        if (size > MAX_SIZE) {
            throw new IllegalArgumentException("size " + size + " exceeds the limit of " + MAX_SIZE + " bytes");
        }
        if (concurrency <= 0 || concurrency > MAX_CONCURRENCY) {
            throw new IllegalArgumentException("concurrency must be 1.." + MAX_CONCURRENCY + ": " + concurrency);
        }
        if (warmupMillis < 0) {
            throw new IllegalArgumentException("warm-up time must not be negative: " + warmupMillis);
        }
        if (warmupCalls < 0) {
            throw new IllegalArgumentException("warm-up calls must not be negative: " + warmupCalls);
        }
        if (durationMillis <= 0) {
            throw new IllegalArgumentException("duration must be positive: " + durationMillis);
        }
        if (timeoutMillis <= 0) {
            throw new IllegalArgumentException("timeout must be positive: " + timeoutMillis);
        }
    }

    /** A spec with a warm-up of 2 s and {@link #DEFAULT_WARMUP_CALLS}, 5 s measured and a 10 s timeout. */
    public static RpcBenchSpec of(String provider, int size, int concurrency) {
        return new RpcBenchSpec(provider, size, concurrency, 2_000, DEFAULT_WARMUP_CALLS, 5_000, 10_000);
    }

    /** This spec with other warm-up and measured times. */
    public RpcBenchSpec withTimes(long warmup, long duration) {
        return new RpcBenchSpec(provider, size, concurrency, warmup, warmupCalls, duration, timeoutMillis);
    }

    /** This spec with another timeout. */
    public RpcBenchSpec withTimeoutMillis(long value) {
        return new RpcBenchSpec(provider, size, concurrency, warmupMillis, warmupCalls, durationMillis, value);
    }

    /** Whether this run goes over the Netty transport rather than libfabric. */
    public boolean isNetty() {
        return provider.equals(PingPongSpec.NETTY);
    }

    /** {@code "fabric"} or {@code "netty"}. */
    public String transport() {
        return isNetty() ? PingPongSpec.NETTY : "fabric";
    }

    /**
     * The transport configuration of either side: the defaults, with pools large enough for
     * every caller's request and response in flight at once, twice over.
     */
    public TransportConfig transportConfig() {
        TransportConfig defaults = TransportConfig.defaults(provider);
        long perCall = 2L * ((long) size + 4096) * concurrency;
        return defaults.withPools(Math.max(defaults.sendPoolBytes(), 2 * perCall),
                defaults.receivePoolBytes(), Math.max(defaults.rendezvousPoolBytes(), 2 * perCall));
    }

    /** A short label such as {@code shm 64 B x1}. */
    public String label() {
        return provider + " " + size + " B x" + concurrency;
    }
}
