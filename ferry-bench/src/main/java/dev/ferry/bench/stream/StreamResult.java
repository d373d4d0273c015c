package dev.ferry.bench.stream;

import java.util.Locale;

import org.HdrHistogram.Histogram;

/**
 * The outcome of one run. Latency is per message, from {@code send} to the completion of that
 * send (its future, or the raw send completion), in microseconds; for a ping-pong it is the
 * round trip.
 *
 * @param spec what was measured
 * @param messages timed messages (round trips for a ping-pong)
 * @param seconds timed duration, from the first timed send to the last completion
 * @param meanUs mean latency
 * @param p50Us median
 * @param p99Us 99th percentile
 * @param p999Us 99.9th percentile
 * @param maxUs slowest
 * @param client the sender's counters over the run
 * @param server the receiver's counters over the run
 * @param allocBytesPerMessage bytes the sending thread allocated per timed message (JVM
 *     per-thread counter), or -1 if unknown; the transport's own threads are not in it
 * @param serverPid the PID the server child had (it is gone when the run returns)
 */
public record StreamResult(StreamSpec spec, long messages, double seconds, double meanUs, double p50Us, double p99Us,
        double p999Us, double maxUs, SideCounters client, SideCounters server, double allocBytesPerMessage,
        long serverPid) {

    /** A result from latencies in nanoseconds. */
    static StreamResult of(StreamSpec spec, long messages, long nanos, Histogram latency, SideCounters client,
            SideCounters server, double alloc, long serverPid) {
        return new StreamResult(spec, messages, nanos / 1e9, latency.getMean() / 1e3,
                latency.getValueAtPercentile(50) / 1e3, latency.getValueAtPercentile(99) / 1e3,
                latency.getValueAtPercentile(99.9) / 1e3, latency.getMaxValue() / 1e3, client, server, alloc, serverPid);
    }

    /** Messages per second (round trips per second for a ping-pong). */
    public double messagesPerSecond() {
        return seconds > 0 ? messages / seconds : 0;
    }

    /** Payload mebibytes per second, one way. */
    public double mebibytesPerSecond() {
        return messagesPerSecond() * spec.size() / (1024.0 * 1024.0);
    }

    /** A few lines for people. */
    public String text() {
        String rate = spec.mode() == StreamSpec.Mode.PINGPONG ? "round trips/s" : "msg/s";
        String what = spec.mode() == StreamSpec.Mode.PINGPONG ? "round trip" : "send->complete";
        return String.format(Locale.ROOT,
                "%s: %,.0f %s, %.1f MiB/s (%,d messages in %.2f s)%n"
                        + "  %s us: mean %.2f  p50 %.2f  p99 %.2f  p99.9 %.2f  max %.1f%n"
                        + "  sender:   %s%n"
                        + "  receiver: %s%n"
                        + "  sending thread allocated %s per message",
                spec.label(), messagesPerSecond(), rate, mebibytesPerSecond(), messages, seconds,
                what, meanUs, p50Us, p99Us, p999Us, maxUs, client.text(), server.text(),
                allocBytesPerMessage < 0 ? "unknown" : String.format(Locale.ROOT, "%.1f B", allocBytesPerMessage));
    }

    /** One JSON object on one line. */
    public String json() {
        return String.format(Locale.ROOT,
                "{\"workload\":\"%s\",\"transport\":\"%s\",\"provider\":\"%s\",\"size\":%d,\"window\":%d,"
                        + "\"messages\":%d,\"seconds\":%.4f,\"msgs_per_s\":%.1f,\"mib_per_s\":%.3f,"
                        + "\"mean_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":%.3f,"
                        + "\"counters\":{%s,\"server\":{%s}},\"alloc_bytes_per_msg\":%.1f}",
                spec.mode() == StreamSpec.Mode.PINGPONG ? "pingpong" : "stream", spec.transportName(), spec.provider(),
                spec.size(), spec.effectiveWindow(), messages, seconds, messagesPerSecond(), mebibytesPerSecond(),
                meanUs, p50Us, p99Us, p999Us, maxUs, client.jsonFields(), server.jsonFields(), allocBytesPerMessage);
    }

    /** {@code 64 B}, {@code 4 KiB}, {@code 16 MiB}: binary units where exact. */
    static String bytes(long n) {
        if (n >= 1 << 20 && n % (1 << 20) == 0) {
            return n / (1 << 20) + " MiB";
        }
        if (n >= 1 << 10 && n % (1 << 10) == 0) {
            return n / (1 << 10) + " KiB";
        }
        return n + " B";
    }
}
