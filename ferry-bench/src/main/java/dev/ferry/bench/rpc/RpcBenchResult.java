package dev.ferry.bench.rpc;

import java.util.Locale;
import org.HdrHistogram.Histogram;

/**
 * The outcome of one RPC benchmark run. Latencies are whole calls (request out, response in) in
 * microseconds, over the calls that started within the measured time.
 *
 * @param spec what was measured
 * @param warmupCalls untimed calls made first
 * @param calls timed calls
 * @param seconds length of the measured time
 * @param callsPerSecond timed calls per second, over all callers
 * @param meanUs mean call
 * @param p50Us median
 * @param p99Us 99th percentile
 * @param p999Us 99.9th percentile
 * @param minUs fastest
 * @param maxUs slowest
 * @param serverPid the server child's process id (gone by the time the result is returned)
 */
public record RpcBenchResult(RpcBenchSpec spec, long warmupCalls, long calls, double seconds, double callsPerSecond,
        double meanUs, double p50Us, double p99Us, double p999Us, double minUs, double maxUs, long serverPid) {

    /** The result of calls recorded in nanoseconds in {@code histogram} over {@code seconds}. */
    static RpcBenchResult of(RpcBenchSpec spec, long warmupCalls, Histogram histogram, double seconds, long serverPid) {
        long calls = histogram.getTotalCount();
        return new RpcBenchResult(spec, warmupCalls, calls, seconds, calls / seconds, histogram.getMean() / 1e3,
                histogram.getValueAtPercentile(50) / 1e3, histogram.getValueAtPercentile(99) / 1e3,
                histogram.getValueAtPercentile(99.9) / 1e3, histogram.getMinValue() / 1e3,
                histogram.getMaxValue() / 1e3, serverPid);
    }

    /** A few human-readable lines. */
    public String text() {
        return String.format(Locale.ROOT,
                "rpc round trip, %s %s, %d B each way, %d caller%s: %d calls in %.1f s (+%d warm-up), %.0f calls/s%n"
                        + "  round trip us: mean %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f  min %.2f  max %.2f",
                spec.transport(), spec.provider(), spec.size(), spec.concurrency(), spec.concurrency() == 1 ? "" : "s",
                calls, seconds, warmupCalls, callsPerSecond, meanUs, p50Us, p99Us, p999Us, minUs, maxUs);
    }

    /** One JSON object on one line. */
    public String json() {
        return String.format(Locale.ROOT,
                "{\"benchmark\":\"rpc\",\"transport\":\"%s\",\"provider\":\"%s\",\"size\":%d,\"concurrency\":%d,"
                        + "\"warmup_ms\":%d,\"warmup_min_calls\":%d,\"duration_ms\":%d,\"warmup_calls\":%d,"
                        + "\"calls\":%d,\"seconds\":%.3f,"
                        + "\"calls_per_s\":%.1f,\"mean_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,"
                        + "\"min_us\":%.3f,\"max_us\":%.3f,\"server_pid\":%d}",
                spec.transport(), spec.provider(), spec.size(), spec.concurrency(), spec.warmupMillis(),
                spec.warmupCalls(), spec.durationMillis(), warmupCalls, calls, seconds, callsPerSecond, meanUs, p50Us,
                p99Us, p999Us, minUs, maxUs, serverPid);
    }
}
