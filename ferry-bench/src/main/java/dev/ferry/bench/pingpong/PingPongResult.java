package dev.ferry.bench.pingpong;

import java.util.Locale;
import org.HdrHistogram.Histogram;

/**
 * The outcome of one ping-pong run. Latencies are whole round trips in microseconds.
 *
 * @param spec what was measured
 * @param warmupRoundTrips untimed round trips run first (at least {@code spec.warmup()})
 * @param meanUs mean round trip
 * @param p50Us median
 * @param p99Us 99th percentile
 * @param p999Us 99.9th percentile
 * @param minUs fastest
 * @param maxUs slowest
 * @param clientAllocBytesPerRoundTrip bytes the client's timing thread allocated per timed round
 *     trip (from the JVM's per-thread allocation counter), or -1 if unknown
 * @param serverAllocBytesPerRoundTrip the same for the server's thread, or -1 if unknown
 * @param serverPid the server child's process id (gone by the time the result is returned)
 */
public record PingPongResult(PingPongSpec spec, long warmupRoundTrips, double meanUs, double p50Us, double p99Us, double p999Us,
        double minUs, double maxUs, double clientAllocBytesPerRoundTrip, double serverAllocBytesPerRoundTrip,
        long serverPid) {

    /** The result of round trips recorded in nanoseconds in {@code histogram}. */
    public static PingPongResult of(PingPongSpec spec, long warmupRoundTrips, Histogram histogram, double clientAlloc,
            double serverAlloc) {
        return new PingPongResult(spec, warmupRoundTrips, histogram.getMean() / 1e3,
                histogram.getValueAtPercentile(50) / 1e3,
                histogram.getValueAtPercentile(99) / 1e3,
                histogram.getValueAtPercentile(99.9) / 1e3,
                histogram.getMinValue() / 1e3,
                histogram.getMaxValue() / 1e3,
                clientAlloc, serverAlloc, -1);
    }

    /** This result with the server's process id. */
    public PingPongResult withServerPid(long pid) {
        return new PingPongResult(spec, warmupRoundTrips, meanUs, p50Us, p99Us, p999Us, minUs, maxUs,
                clientAllocBytesPerRoundTrip, serverAllocBytesPerRoundTrip, pid);
    }

    /** A few human-readable lines. */
    public String text() {
        return String.format(Locale.ROOT,
                "%s ping-pong, %s %s, %d B, %d round trips (+%d warm-up)%n"
                        + "  round trip us: mean %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f  min %.2f  max %.2f%n"
                        + "  allocated per round trip: client %s, server %s",
                spec.transport(), spec.provider(), spec.endpointName(), spec.size(), spec.iterations(), warmupRoundTrips,
                meanUs, p50Us, p99Us, p999Us, minUs, maxUs, bytes(clientAllocBytesPerRoundTrip),
                bytes(serverAllocBytesPerRoundTrip));
    }

    private static String bytes(double value) {
        return value < 0 ? "unknown" : String.format(Locale.ROOT, "%.1f B", value);
    }

    /** One JSON object on one line. */
    public String json() {
        return "{" + jsonFields() + "}";
    }

    /** The JSON members without braces, for callers that add their own. */
    public String jsonFields() {
        return String.format(Locale.ROOT,
                "\"transport\":\"%s\",\"provider\":\"%s\",\"endpoint\":\"%s\",\"size\":%d,\"iterations\":%d,"
                        + "\"warmup\":%d,\"mean_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
                        + "\"min_us\":%.3f,\"max_us\":%.3f,\"alloc_bytes_per_rt\":%.2f,\"server_alloc_bytes_per_rt\":%.2f,"
                        + "\"server_pid\":%d",
                spec.transport(), spec.provider(), spec.endpointName(), spec.size(), spec.iterations(), warmupRoundTrips,
                meanUs, p50Us, p99Us, p999Us, minUs, maxUs, clientAllocBytesPerRoundTrip, serverAllocBytesPerRoundTrip,
                serverPid);
    }
}
