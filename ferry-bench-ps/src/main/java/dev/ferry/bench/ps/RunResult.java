package dev.ferry.bench.ps;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

import org.HdrHistogram.Histogram;

/**
 * One transport's measured interval: latencies (ns), operations, keys, the CPU time of every
 * process involved, and counters of clients and servers.
 *
 * @param workload    {@code fetch} or {@code push}
 * @param transport   shm, tcp, netty or grpc
 * @param flowControl whether Ferry's send windows and credits were on (always true for grpc)
 * @param latency     per-request latency in nanoseconds, over all clients
 * @param operations  requests completed in the measured interval
 * @param keys        ids in them
 * @param errors      requests that failed
 * @param seconds     the measured interval
 * @param cpuNanos    CPU time of all client and server processes in the interval
 * @param steps       push only: the driver's step times (barrier release to the last worker's
 *                    arrival at the next barrier), in nanoseconds; null for fetch
 * @param counters    transport and queue counters, summed over processes (peaks: the maximum)
 */
record RunResult(String workload, String transport, boolean flowControl, Histogram latency, long operations,
        long keys, long errors, double seconds, long cpuNanos, Histogram steps, Map<String, Long> counters) {

    /** This result under another transport label (a pull format's run: {@code shm-f16}). */
    RunResult withTransport(String label) {
        return new RunResult(workload, label, flowControl, latency, operations, keys, errors, seconds, cpuNanos, steps,
                counters);
    }

    /** The name in tables and plots: the transport, and {@code -nofc} with flow control off. */
    String label() {
        return flowControl ? transport : transport + "-nofc";
    }

    double meanMicros() {
        return latency.getMean() / 1e3;
    }

    double percentileMicros(double percentile) {
        return latency.getValueAtPercentile(percentile) / 1e3;
    }

    double opsPerSecond() {
        return operations / seconds;
    }

    double keysPerSecond() {
        return keys / seconds;
    }

    double cpuMicrosPerOp() {
        return operations == 0 ? Double.NaN : cpuNanos / 1e3 / operations;
    }

    /** The JSON line of this result. */
    String json() {
        return json(Map.of());
    }

    /** The JSON line of this result, with {@code extra} fields (the floor and layer costs) after the figures. */
    String json(Map<String, Object> extra) {
        Map<String, Object> fields = new LinkedHashMap<>();
        fields.put("workload", workload);
        fields.put("transport", transport);
        fields.put("flow_control", flowControl);
        fields.put("mean_us", meanMicros());
        fields.put("p50_us", percentileMicros(50));
        fields.put("p99_us", percentileMicros(99));
        fields.put("p999_us", percentileMicros(99.9));
        fields.put("max_us", latency.getMaxValue() / 1e3);
        fields.put("ops_per_s", opsPerSecond());
        fields.put("keys_per_s", keysPerSecond());
        fields.put("cpu_us_per_op", cpuMicrosPerOp());
        fields.put("operations", operations);
        fields.put("errors", errors);
        fields.put("seconds", seconds);
        if (steps != null && steps.getTotalCount() > 0) {
            fields.put("step_mean_us", steps.getMean() / 1e3);
            fields.put("step_p99_us", steps.getValueAtPercentile(99) / 1e3);
            fields.put("steps", steps.getTotalCount());
        }
        fields.putAll(extra);
        fields.putAll(counters);
        StringBuilder s = new StringBuilder("{");
        fields.forEach((k, v) -> {
            if (s.length() > 1) {
                s.append(',');
            }
            s.append('"').append(k).append("\":");
            if (v instanceof String text) {
                s.append('"').append(text.replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            } else if (v instanceof Double d) {
                s.append(Double.isFinite(d) ? String.format(Locale.ROOT, "%.3f", d) : "null");
            } else {
                s.append(v);
            }
        });
        return s.append('}').toString();
    }
}
