package dev.ferry.bench.pingpong;

import dev.ferry.fabric.EndpointType;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;

/**
 * What one ping-pong run measures, checked on construction so that bad input fails before any
 * process starts.
 *
 * @param provider a libfabric provider ({@code shm}, {@code tcp}, ...) or {@link #NETTY} for the
 *     kernel-TCP baseline through the transport API
 * @param endpoint the libfabric endpoint type; {@code null} for Netty
 * @param size bytes per message, each way
 * @param iterations timed round trips
 * @param warmup untimed round trips first at least, so that the JIT has compiled the loop and caches are warm
 * @param warmupMillis how long the warm-up lasts at least: the JIT keeps compiling for a while
 *     after the loop first runs compiled, and its threads take the pollers' CPUs meanwhile
 * @param pin whether to pin the two polling threads to different CPUs (when there are two)
 * @param timeoutMillis how long to wait for the server to start, or for any one reply
 */
public record PingPongSpec(String provider, EndpointType endpoint, int size, int iterations, int warmup,
        long warmupMillis, boolean pin, long timeoutMillis) {

    /** The provider name of the Netty kernel-TCP transport. */
    public static final String NETTY = "netty";

    /** The largest message the benchmark sends: enough for rendezvous-sized payloads, small enough to stay in RAM twice. */
    public static final int MAX_SIZE = 64 << 20;

    /**
     * libfabric providers this benchmark knows by name; whether one is installed is found out at
     * run time. Anything else is a typo, refused as bad input.
     */
    public static final Set<String> FABRIC_PROVIDERS = Set.of("shm", "tcp", "verbs", "efa", "cxi", "psm3", "opx",
            "ucx", "sockets", "udp", "net");

    /** Checks the values against each other. */
    public PingPongSpec {
        Objects.requireNonNull(provider, "provider");
        if (!provider.equals(NETTY) && !FABRIC_PROVIDERS.contains(provider)) {
            throw new IllegalArgumentException("unknown provider '" + provider + "' (expected one of "
                    + String.join(", ", knownProviders()) + ")");
        }
        if (provider.equals(NETTY)) {
            if (endpoint != null) {
                throw new IllegalArgumentException("--endpoint applies to libfabric providers, not to netty");
            }
        } else {
            if (endpoint == null) {
                throw new IllegalArgumentException("a libfabric provider needs an endpoint type");
            }
            if (endpoint == EndpointType.UNSPEC) {
                throw new IllegalArgumentException("endpoint type must be msg or rdm");
            }
            if (provider.equals("shm") && endpoint == EndpointType.MSG) {
                throw new IllegalArgumentException("provider shm offers rdm endpoints only");
            }
        }
        if (size < 0) {
            throw new IllegalArgumentException("size must not be negative: " + size);
        }
        if (size > MAX_SIZE) {
            throw new IllegalArgumentException("size " + size + " exceeds the limit of " + MAX_SIZE + " bytes");
        }
        if (iterations <= 0) {
            throw new IllegalArgumentException("iterations must be positive: " + iterations);
        }
        if (warmup < 0) {
            throw new IllegalArgumentException("warmup must not be negative: " + warmup);
        }
        if (warmupMillis < 0) {
            throw new IllegalArgumentException("warm-up time must not be negative: " + warmupMillis);
        }
        if (timeoutMillis <= 0) {
            throw new IllegalArgumentException("timeout must be positive: " + timeoutMillis);
        }
    }

    /**
     * A spec with the default endpoint type for {@code provider} when {@code endpoint} is null:
     * msg for tcp and verbs (one queue pair per peer, like the paper), rdm for everything else.
     */
    public static PingPongSpec of(String provider, String endpoint, int size, int iterations, int warmup) {
        Objects.requireNonNull(provider, "provider");
        String p = provider.toLowerCase(Locale.ROOT);
        return new PingPongSpec(p, endpointType(p, endpoint), size, iterations, warmup, 0, true, 10_000);
    }

    private static EndpointType endpointType(String provider, String endpoint) {
        if (provider.equals(NETTY)) {
            if (endpoint != null) {
                throw new IllegalArgumentException("--endpoint applies to libfabric providers, not to netty");
            }
            return null;
        }
        if (endpoint == null) {
            return provider.equals("tcp") || provider.equals("verbs") ? EndpointType.MSG : EndpointType.RDM;
        }
        return switch (endpoint.toLowerCase(Locale.ROOT)) {
            case "msg" -> EndpointType.MSG;
            case "rdm" -> EndpointType.RDM;
            default -> throw new IllegalArgumentException("unknown endpoint type '" + endpoint + "' (expected msg or rdm)");
        };
    }

    /** Every provider name accepted, Netty last. */
    public static List<String> knownProviders() {
        List<String> names = new ArrayList<>(FABRIC_PROVIDERS);
        names.sort(null);
        names.add(NETTY);
        return names;
    }

    /** Whether this run goes through the Netty transport rather than libfabric. */
    public boolean isNetty() {
        return provider.equals(NETTY);
    }

    /** {@code "fabric"} or {@code "netty"}. */
    public String transport() {
        return isNetty() ? NETTY : "fabric";
    }

    /** {@code "msg"}, {@code "rdm"}, or {@code "tcp"} (a kernel socket) for Netty. */
    public String endpointName() {
        return isNetty() ? "tcp" : endpoint.name().toLowerCase(Locale.ROOT);
    }

    /** This spec with another minimum warm-up time. */
    public PingPongSpec withWarmupMillis(long value) {
        return new PingPongSpec(provider, endpoint, size, iterations, warmup, value, pin, timeoutMillis);
    }

    /** This spec with pinning on or off. */
    public PingPongSpec withPin(boolean value) {
        return new PingPongSpec(provider, endpoint, size, iterations, warmup, warmupMillis, value, timeoutMillis);
    }

    /** This spec with another timeout. */
    public PingPongSpec withTimeoutMillis(long value) {
        return new PingPongSpec(provider, endpoint, size, iterations, warmup, warmupMillis, pin, value);
    }

    /** A short label such as {@code shm rdm 64 B}. */
    public String label() {
        return provider + " " + endpointName() + " " + size + " B";
    }
}
