package dev.ferry.metrics.stat;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * What {@code ferry stat} shows of one process, from two scrapes {@code seconds} apart (rates
 * and quantiles of that interval) or one (totals since start, quantiles since start).
 *
 * @param target        the {@code host:port} of its metrics endpoint
 * @param state         {@code ready}, {@code starting} (not ready yet) or {@code down} (no answer)
 * @param error         why it is down, or null
 * @param methods       per side and method: rates and latency quantiles
 * @param links         links open now, all transports
 * @param credits       send credits held now
 * @param creditStalls  credit stalls since start, and per second over the interval
 * @param windowStalls  window stalls since start, and per second
 * @param linkFailures  links failed since start
 * @param inFlightBytes bytes in flight now
 * @param registeredBytes registered memory now
 * @param tables        rows and memory per table
 * @param traffic       messages in per second per transport (provider and role): where the traffic goes
 * @param serversOnFallback for an RPC client: servers whose traffic is on the fallback now (NaN if no client)
 */
public record ServerStat(String target, String state, String error, List<MethodStat> methods, double links,
        double credits, Rate creditStalls, Rate windowStalls, double linkFailures, double inFlightBytes,
        double registeredBytes, List<TableStat> tables, List<Traffic> traffic, double serversOnFallback) {

    /** A counter's total and its rate over the interval (NaN with one scrape). */
    public record Rate(double total, double perSecond) {
    }

    /** One method on one side. Quantiles in seconds, NaN when no call completed in the interval. */
    public record MethodStat(String side, String method, double opsPerSecond, double errorsPerSecond, double p50,
            double p99, double calls) {
    }

    /** One table. */
    public record TableStat(String table, double rows, double bytes) {
    }

    /** Messages received per second on one transport kind. */
    public record Traffic(String provider, String role, double messagesPerSecond, double bytesPerSecond) {
    }

    /** A process that did not answer. */
    public static ServerStat down(String target, String error) {
        return new ServerStat(target, "down", error, List.of(), Double.NaN, Double.NaN, new Rate(Double.NaN, Double.NaN),
                new Rate(Double.NaN, Double.NaN), Double.NaN, Double.NaN, Double.NaN, List.of(), List.of(), Double.NaN);
    }

    /**
     * The view of {@code current}, with rates against {@code previous} taken {@code seconds} before
     * (null: none).
     */
    public static ServerStat of(String target, boolean ready, Samples previous, Samples current, double seconds) {
        List<MethodStat> methods = new ArrayList<>();
        methods.addAll(methods("server", "ferry_rpc_server_handler_seconds", previous, current, seconds));
        methods.addAll(methods("client", "ferry_rpc_client_call_seconds", previous, current, seconds));
        List<TableStat> tables = new ArrayList<>();
        for (Samples.Sample s : current.all("ferry_ps_table_rows")) {
            String t = s.label("table");
            tables.add(new TableStat(t, s.value(), current.sum("ferry_ps_table_memory_bytes", "table", t)));
        }
        List<Traffic> traffic = new ArrayList<>();
        for (Samples.Sample s : current.all("ferry_transport_messages_received_total")) {
            String p = s.label("provider");
            String r = s.label("role");
            traffic.add(new Traffic(p, r, rate(previous, current, seconds, "ferry_transport_messages_received_total",
                    "provider", p, "role", r), rate(previous, current, seconds, "ferry_transport_received_bytes_total",
                    "provider", p, "role", r)));
        }
        return new ServerStat(target, ready ? "ready" : "starting", null, methods,
                current.sum("ferry_transport_links_open"), current.sum("ferry_transport_credits_available"),
                new Rate(current.sum("ferry_transport_credit_stalls_total"),
                        rate(previous, current, seconds, "ferry_transport_credit_stalls_total")),
                new Rate(current.sum("ferry_transport_window_stalls_total"),
                        rate(previous, current, seconds, "ferry_transport_window_stalls_total")),
                current.sum("ferry_transport_link_failures_total"), current.sum("ferry_transport_in_flight_bytes"),
                current.sum("ferry_memory_registered_bytes"), tables, traffic,
                current.has("ferry_rpc_client_servers_on_fallback")
                        ? current.sum("ferry_rpc_client_servers_on_fallback") : Double.NaN);
    }

    private static double rate(Samples previous, Samples current, double seconds, String name, String... labels) {
        if (previous == null || seconds <= 0) {
            return Double.NaN;
        }
        return Math.max(0, current.sum(name, labels) - previous.sum(name, labels)) / seconds;
    }

    private static List<MethodStat> methods(String side, String base, Samples previous, Samples current,
            double seconds) {
        TreeSet<String> names = new TreeSet<>();
        for (Samples.Sample s : current.all(base + "_count")) {
            names.add(s.label("method"));
        }
        List<MethodStat> out = new ArrayList<>();
        for (String m : names) {
            double count = current.sum(base + "_count", "method", m);
            double errors = current.sum(base + "_count", "method", m, "outcome", "error");
            double before = previous == null ? 0 : previous.sum(base + "_count", "method", m);
            double errorsBefore = previous == null ? 0 : previous.sum(base + "_count", "method", m, "outcome", "error");
            if (count == 0) {
                continue; // never called: not worth a line
            }
            Map<Double, Double> buckets = buckets(current, base, m);
            if (previous != null) {
                Map<Double, Double> old = buckets(previous, base, m);
                buckets.replaceAll((le, v) -> v - old.getOrDefault(le, 0.0));
            }
            double ops = previous == null || seconds <= 0 ? Double.NaN : (count - before) / seconds;
            double errs = previous == null || seconds <= 0 ? Double.NaN : (errors - errorsBefore) / seconds;
            out.add(new MethodStat(side, m, ops, errs, quantile(buckets, 0.50), quantile(buckets, 0.99), count));
        }
        return out;
    }

    /** Cumulative bucket counts by upper bound, summed over outcomes. */
    private static Map<Double, Double> buckets(Samples samples, String base, String method) {
        Map<Double, Double> b = new TreeMap<>();
        for (Samples.Sample s : samples.all(base + "_bucket")) {
            if (s.label("method").equals(method)) {
                String le = s.label("le");
                double bound = le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le);
                b.merge(bound, s.value(), Double::sum);
            }
        }
        return b;
    }

    /**
     * The {@code q} quantile of a cumulative histogram, interpolated linearly inside its bucket;
     * NaN if it is empty, the last finite bound if it falls in the overflow bucket.
     */
    static double quantile(Map<Double, Double> cumulative, double q) {
        double total = 0;
        for (double v : cumulative.values()) {
            total = Math.max(total, v);
        }
        if (total <= 0) {
            return Double.NaN;
        }
        double rank = q * total;
        double lowerBound = 0;
        double lowerCount = 0;
        for (Map.Entry<Double, Double> e : cumulative.entrySet()) {
            double bound = e.getKey();
            double count = e.getValue();
            if (count >= rank) {
                if (Double.isInfinite(bound)) {
                    return lowerBound;
                }
                double inBucket = count - lowerCount;
                return inBucket <= 0 ? bound : lowerBound + (bound - lowerBound) * (rank - lowerCount) / inBucket;
            }
            lowerBound = bound;
            lowerCount = count;
        }
        return lowerBound;
    }
}
