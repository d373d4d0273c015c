package dev.ferry.bench.stream;

import java.util.List;
import java.util.Locale;
import java.util.Objects;

/**
 * What one stream run measures. Build with {@link #of} and adjust with the {@code with*} methods.
 *
 * @param provider {@code shm}, {@code tcp} (libfabric; also {@code verbs}, {@code efa}, ... where
 *     installed) or {@code netty} (kernel TCP through the transport API)
 * @param implementation Ferry's transport API or the raw libfabric binding
 * @param mode a one-way stream, or a ping-pong (round trips) through the same code
 * @param size message bytes
 * @param messages timed messages; 0 means run for {@code seconds} instead
 * @param seconds timed duration when {@code messages} is 0
 * @param warmupSeconds untimed streaming first, for the JIT and the pools
 * @param window messages in flight at most (sent and not completed); 0 picks
 *     {@link #autoWindow(int)}. The raw stream posts this many receives at the server
 * @param streams transport streams used round-robin (they map onto the peer's links)
 * @param timeoutMillis longest wait for the server to start or for any one completion
 * @param serverJvmOptions extra options for the server's JVM (such as a flight recording)
 */
public record StreamSpec(String provider, Implementation implementation, Mode mode, int size, long messages,
        double seconds, double warmupSeconds, int window, int streams, long timeoutMillis,
        List<String> serverJvmOptions) {

    /** The largest message: the transport's default {@code maxMessageSize}. */
    public static final int MAX_SIZE = 256 << 20;
    /** The Netty baseline's provider name. */
    public static final String NETTY = "netty";

    /** What sends the messages. */
    public enum Implementation {
        /** Ferry's transport API: {@code Peer.allocate}, {@code Peer.send}, futures. */
        TRANSPORT,
        /** The libfabric binding alone: posted receives, fi_send, bench-kept credits. */
        RAW
    }

    /** The traffic pattern. */
    public enum Mode {
        /** One-way: the client keeps {@code window} messages in flight. */
        STREAM,
        /** Round trips: the server echoes each message; one in flight. */
        PINGPONG
    }

    /** Checks the settings. */
    public StreamSpec {
        Objects.requireNonNull(provider, "provider");
        Objects.requireNonNull(implementation, "implementation");
        Objects.requireNonNull(mode, "mode");
        provider = provider.toLowerCase(Locale.ROOT);
        serverJvmOptions = List.copyOf(serverJvmOptions);
        if (size < 0 || size > MAX_SIZE) {
            throw new IllegalArgumentException("size must be 0.." + MAX_SIZE + ": " + size);
        }
        if (messages < 0) {
            throw new IllegalArgumentException("messages must not be negative: " + messages);
        }
        if (messages == 0 && !(seconds > 0)) {
            throw new IllegalArgumentException("give a positive --messages or --seconds");
        }
        if (warmupSeconds < 0) {
            throw new IllegalArgumentException("warm-up must not be negative: " + warmupSeconds);
        }
        if (window < 0) {
            throw new IllegalArgumentException("window must not be negative (0 picks one): " + window);
        }
        if (streams <= 0) {
            throw new IllegalArgumentException("streams must be positive: " + streams);
        }
        if (timeoutMillis <= 0) {
            throw new IllegalArgumentException("timeout must be positive: " + timeoutMillis);
        }
        if (implementation == Implementation.RAW && provider.equals(NETTY)) {
            throw new IllegalArgumentException("--raw measures a libfabric provider; netty has no raw binding");
        }
        if (implementation == Implementation.RAW && mode == Mode.PINGPONG) {
            throw new IllegalArgumentException("the raw binding's round trip is 'ferry bench pingpong'; "
                    + "--pingpong here goes through the transport API");
        }
    }

    /** A stream of {@code size}-byte messages on {@code provider} for 2 s after 1 s of warm-up. */
    public static StreamSpec of(String provider, int size) {
        return new StreamSpec(provider, Implementation.TRANSPORT, Mode.STREAM, size, 0, 2.0, 1.0, 0, 1, 10_000,
                List.of());
    }

    /**
     * The default window for {@code size}: 64 messages (the transport's receive buffers per
     * link) up to 64 MiB in flight, and at least 2 so that one completes while the next goes.
     */
    public static int autoWindow(int size) {
        long bySize = (64L << 20) / Math.max(1, size);
        return (int) Math.max(2, Math.min(64, bySize));
    }

    /** The window in force. */
    public int effectiveWindow() {
        return mode == Mode.PINGPONG ? 1 : window > 0 ? window : autoWindow(size);
    }

    /** The name of what is measured: {@code fabric}, {@code netty} or {@code raw}. */
    public String transportName() {
        if (implementation == Implementation.RAW) {
            return "raw";
        }
        return provider.equals(NETTY) ? NETTY : "fabric";
    }

    /** The libfabric provider without an endpoint suffix ({@code tcp/rdm} is {@code tcp}). */
    public String fabricProvider() {
        int slash = provider.indexOf('/');
        return slash < 0 ? provider : provider.substring(0, slash);
    }

    /** This spec on the raw binding or on the transport API. */
    public StreamSpec withImplementation(Implementation value) {
        return new StreamSpec(provider, value, mode, size, messages, seconds, warmupSeconds, window, streams,
                timeoutMillis, serverJvmOptions);
    }

    /** This spec in another mode. */
    public StreamSpec withMode(Mode value) {
        return new StreamSpec(provider, implementation, value, size, messages, seconds, warmupSeconds, window, streams,
                timeoutMillis, serverJvmOptions);
    }

    /** This spec with another message size. */
    public StreamSpec withSize(int value) {
        return new StreamSpec(provider, implementation, mode, value, messages, seconds, warmupSeconds, window, streams,
                timeoutMillis, serverJvmOptions);
    }

    /** This spec timed by a message count (0: by {@code seconds}). */
    public StreamSpec withMessages(long value) {
        return new StreamSpec(provider, implementation, mode, size, value, seconds, warmupSeconds, window, streams,
                timeoutMillis, serverJvmOptions);
    }

    /** This spec timed by duration, after {@code warmup} seconds of warm-up. */
    public StreamSpec withSeconds(double value, double warmup) {
        return new StreamSpec(provider, implementation, mode, size, messages, value, warmup, window, streams,
                timeoutMillis, serverJvmOptions);
    }

    /** This spec with another window (0: automatic) and stream count. */
    public StreamSpec withWindow(int value, int streamCount) {
        return new StreamSpec(provider, implementation, mode, size, messages, seconds, warmupSeconds, value,
                streamCount, timeoutMillis, serverJvmOptions);
    }

    /** This spec with another timeout and server JVM options. */
    public StreamSpec withServer(long timeout, List<String> jvmOptions) {
        return new StreamSpec(provider, implementation, mode, size, messages, seconds, warmupSeconds, window, streams,
                timeout, jvmOptions);
    }

    /** Something like {@code fabric/shm 64 B stream, window 64}. */
    public String label() {
        return transportName() + "/" + provider + " " + StreamResult.bytes(size) + " "
                + (mode == Mode.PINGPONG ? "ping-pong" : "stream, window " + effectiveWindow());
    }
}
