package dev.ferry.rpc;

import java.util.Objects;

import dev.ferry.transport.SharedSecret;

/**
 * Every tunable of the RPC layer, with its default and the reason for it. Start from
 * {@link #defaults()} and change what you need with the {@code with*} methods.
 *
 * @param defaultDeadlineMillis deadline of a call that names none; 10 s outlasts a reconnect
 *     and a few seconds of GC pause, yet fails a call to a dead server in human time
 * @param heartbeatIntervalMillis how often a client pings an idle session; any message from
 *     the server counts as a heartbeat
 * @param failureTimeoutMillis silence after which a session is declared failed. 5 s: ten
 *     heartbeats, long enough that a full GC pause on either side is not taken for a death
 * @param reconnectMinMillis first back-off after a failed connect; later ones double
 * @param reconnectMaxMillis longest back-off between connect attempts to one server
 * @param reconnectsPerSecond connect attempts per second, over all servers of a client: a
 *     restarting cluster is not hammered by every client at once
 * @param dedupeEntriesPerClient stored outcomes of non-idempotent calls per client at most;
 *     client acknowledgements trim them long before, this only bounds a client that stops
 *     acknowledging
 * @param dedupeBytesPerClient bytes of stored responses per client at most, for the same reason
 * @param clientStateTtlMillis how long a server keeps the table of a client it no longer hears
 *     from; longer than any deadline, so a late retry still finds its outcome
 * @param breakerFailures fabric failures within {@code breakerWindowMillis} that move a
 *     server's traffic to the fallback (TCP) transport
 * @param breakerWindowMillis the window of {@code breakerFailures}
 * @param breakerProbeMillis how often a client probes the fabric of a server whose traffic
 *     moved to the fallback, to move back when it heals
 * @param handlerThreads threads of the server's default handler executor
 * @param secret the key for peer authentication; {@code null} turns authentication off (a
 *     demo on one host only). The default reads {@link SharedSecret#fromEnvironment()} when a
 *     client or server opens
 */
public record RpcConfig(
        long defaultDeadlineMillis,
        long heartbeatIntervalMillis,
        long failureTimeoutMillis,
        long reconnectMinMillis,
        long reconnectMaxMillis,
        int reconnectsPerSecond,
        int dedupeEntriesPerClient,
        long dedupeBytesPerClient,
        long clientStateTtlMillis,
        int breakerFailures,
        long breakerWindowMillis,
        long breakerProbeMillis,
        int handlerThreads,
        SecretSource secret) {

    /** Where the secret comes from: resolved when a client or server opens. */
    @FunctionalInterface
    public interface SecretSource {

        /** The secret, or {@code null} for no authentication. */
        SharedSecret resolve();
    }

    /** Checks the settings against each other. */
    public RpcConfig {
        positive("defaultDeadlineMillis", defaultDeadlineMillis);
        positive("heartbeatIntervalMillis", heartbeatIntervalMillis);
        positive("reconnectMinMillis", reconnectMinMillis);
        positive("reconnectsPerSecond", reconnectsPerSecond);
        positive("dedupeEntriesPerClient", dedupeEntriesPerClient);
        positive("dedupeBytesPerClient", dedupeBytesPerClient);
        positive("breakerFailures", breakerFailures);
        positive("breakerWindowMillis", breakerWindowMillis);
        positive("breakerProbeMillis", breakerProbeMillis);
        positive("handlerThreads", handlerThreads);
        if (failureTimeoutMillis < 2 * heartbeatIntervalMillis) {
            throw new IllegalArgumentException("failureTimeoutMillis " + failureTimeoutMillis
                    + " must cover at least two heartbeats of " + heartbeatIntervalMillis + " ms");
        }
        if (reconnectMaxMillis < reconnectMinMillis) {
            throw new IllegalArgumentException("reconnectMaxMillis below reconnectMinMillis");
        }
        if (clientStateTtlMillis < defaultDeadlineMillis) {
            throw new IllegalArgumentException("clientStateTtlMillis must outlast the default deadline");
        }
        Objects.requireNonNull(secret, "secret (use withoutAuthentication() for none)");
    }

    private static void positive(String name, long value) {
        if (value <= 0) {
            throw new IllegalArgumentException(name + " must be positive: " + value);
        }
    }

    /** The defaults; authentication on, with the secret from the environment. */
    public static RpcConfig defaults() {
        return new RpcConfig(10_000, 500, 5_000, 20, 2_000, 50,
                1 << 16, 64L << 20, 600_000,
                3, 10_000, 5_000,
                Math.max(2, Runtime.getRuntime().availableProcessors()),
                SharedSecret::fromEnvironment);
    }

    /** This configuration authenticating with {@code value}. */
    public RpcConfig withSecret(SharedSecret value) {
        Objects.requireNonNull(value, "value");
        return withSecretSource(() -> value);
    }

    /** This configuration without authentication: for a demo on one host, never in production. */
    public RpcConfig withoutAuthentication() {
        return withSecretSource(() -> null);
    }

    private RpcConfig withSecretSource(SecretSource value) {
        return new RpcConfig(defaultDeadlineMillis, heartbeatIntervalMillis, failureTimeoutMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                clientStateTtlMillis, breakerFailures, breakerWindowMillis, breakerProbeMillis, handlerThreads, value);
    }

    /** This configuration with another default deadline. */
    public RpcConfig withDefaultDeadlineMillis(long value) {
        return new RpcConfig(value, heartbeatIntervalMillis, failureTimeoutMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                Math.max(clientStateTtlMillis, value), breakerFailures, breakerWindowMillis, breakerProbeMillis,
                handlerThreads, secret);
    }

    /** This configuration with other failure-detection times. */
    public RpcConfig withHeartbeat(long intervalMillis, long failureMillis) {
        return new RpcConfig(defaultDeadlineMillis, intervalMillis, failureMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                clientStateTtlMillis, breakerFailures, breakerWindowMillis, breakerProbeMillis, handlerThreads, secret);
    }

    /** This configuration with another reconnect back-off and rate. */
    public RpcConfig withReconnect(long minMillis, long maxMillis, int perSecond) {
        return new RpcConfig(defaultDeadlineMillis, heartbeatIntervalMillis, failureTimeoutMillis, minMillis,
                maxMillis, perSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                clientStateTtlMillis, breakerFailures, breakerWindowMillis, breakerProbeMillis, handlerThreads, secret);
    }

    /** This configuration with other bounds on the deduplication table. */
    public RpcConfig withDedupe(int entriesPerClient, long bytesPerClient) {
        return new RpcConfig(defaultDeadlineMillis, heartbeatIntervalMillis, failureTimeoutMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, entriesPerClient, bytesPerClient,
                clientStateTtlMillis, breakerFailures, breakerWindowMillis, breakerProbeMillis, handlerThreads, secret);
    }

    /** This configuration with another circuit breaker. */
    public RpcConfig withBreaker(int failures, long windowMillis, long probeMillis) {
        return new RpcConfig(defaultDeadlineMillis, heartbeatIntervalMillis, failureTimeoutMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                clientStateTtlMillis, failures, windowMillis, probeMillis, handlerThreads, secret);
    }

    /** This configuration with another number of handler threads. */
    public RpcConfig withHandlerThreads(int value) {
        return new RpcConfig(defaultDeadlineMillis, heartbeatIntervalMillis, failureTimeoutMillis, reconnectMinMillis,
                reconnectMaxMillis, reconnectsPerSecond, dedupeEntriesPerClient, dedupeBytesPerClient,
                clientStateTtlMillis, breakerFailures, breakerWindowMillis, breakerProbeMillis, value, secret);
    }
}
