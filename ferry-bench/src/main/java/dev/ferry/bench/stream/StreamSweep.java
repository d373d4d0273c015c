package dev.ferry.bench.stream;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Ferry's transport against the raw binding over a range of sizes, in one run: for each size,
 * {@code runs} alternating runs of each, the best (highest message rate) of each kept, and
 * their ratio. At one size the message-rate ratio and the bandwidth ratio are the same number;
 * it reads as message rate for small messages and as bandwidth for large ones.
 */
public final class StreamSweep {

    /** 64 B, 4 KiB, 64 KiB, 1 MiB and 16 MiB. */
    public static final List<Integer> SIZES = List.of(64, 4 << 10, 64 << 10, 1 << 20, 16 << 20);

    /**
     * One size: the best run of each side; {@code raw} is null where there is no raw binding.
     *
     * @param size message bytes
     * @param ferry the best transport run
     * @param raw the best raw run, or null
     */
    public record Row(int size, StreamResult ferry, StreamResult raw) {

        /** Transport over raw message rate (and bandwidth), or NaN. */
        public double ratio() {
            return raw == null || raw.messagesPerSecond() == 0 ? Double.NaN
                    : ferry.messagesPerSecond() / raw.messagesPerSecond();
        }
    }

    private StreamSweep() {
    }

    /**
     * Runs the sweep for {@code base}'s provider at {@code sizes}, printing progress (and, with
     * {@code json}, each best result as a JSON line) to {@code out}, then the table.
     */
    public static List<Row> run(StreamSpec base, List<Integer> sizes, int runs, PrintWriter out, boolean json) {
        boolean withRaw = !base.provider().equals(StreamSpec.NETTY);
        List<Row> rows = new ArrayList<>();
        for (int size : sizes) {
            StreamSpec ferrySpec = base.withImplementation(StreamSpec.Implementation.TRANSPORT).withSize(size);
            StreamSpec rawSpec = withRaw ? base.withImplementation(StreamSpec.Implementation.RAW).withSize(size) : null;
            StreamResult bestFerry = null;
            StreamResult bestRaw = null;
            for (int run = 1; run <= runs; run++) {
                StreamResult f = StreamBenchmark.run(ferrySpec);
                bestFerry = better(bestFerry, f);
                progress(out, run, runs, f);
                if (withRaw) {
                    StreamResult r = StreamBenchmark.run(rawSpec);
                    bestRaw = better(bestRaw, r);
                    progress(out, run, runs, r);
                }
            }
            Row row = new Row(size, bestFerry, bestRaw);
            rows.add(row);
            if (json) {
                out.println(bestFerry.json());
                if (bestRaw != null) {
                    out.println(bestRaw.json());
                }
            }
            out.flush();
        }
        out.println(table(base.provider(), runs, rows));
        out.flush();
        return rows;
    }

    private static StreamResult better(StreamResult best, StreamResult candidate) {
        return best == null || candidate.messagesPerSecond() > best.messagesPerSecond() ? candidate : best;
    }

    private static void progress(PrintWriter out, int run, int runs, StreamResult r) {
        out.printf(Locale.ROOT, "  run %d/%d %-34s %,12.0f msg/s %10.1f MiB/s  p50 %8.1f us  p99 %8.1f us%n", run, runs,
                r.spec().label(), r.messagesPerSecond(), r.mebibytesPerSecond(), r.p50Us(), r.p99Us());
        out.flush();
    }

    /** The table: per size, the best of each side and the ratio. */
    public static String table(String provider, int runs, List<Row> rows) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "stream sweep, provider %s, best of %d (transport API vs raw binding)%n",
                provider, runs));
        b.append(String.format(Locale.ROOT, "%-7s %6s | %12s %9s %8s %8s | %12s %9s %8s %8s | %6s%n", "size", "window",
                "ferry msg/s", "MiB/s", "p50 us", "p99 us", "raw msg/s", "MiB/s", "p50 us", "p99 us", "ratio"));
        for (Row row : rows) {
            StreamResult f = row.ferry();
            StreamResult r = row.raw();
            b.append(String.format(Locale.ROOT, "%-7s %6d | %,12.0f %9.1f %8.1f %8.1f | ", StreamResult.bytes(row.size()),
                    f.spec().effectiveWindow(), f.messagesPerSecond(), f.mebibytesPerSecond(), f.p50Us(), f.p99Us()));
            if (r == null) {
                b.append(String.format(Locale.ROOT, "%12s %9s %8s %8s | %6s%n", "-", "-", "-", "-", "-"));
            } else {
                b.append(String.format(Locale.ROOT, "%,12.0f %9.1f %8.1f %8.1f | %6.2f%n", r.messagesPerSecond(),
                        r.mebibytesPerSecond(), r.p50Us(), r.p99Us(), row.ratio()));
            }
        }
        Row small = rows.isEmpty() ? null : rows.getFirst();
        Row large = rows.isEmpty() ? null : rows.getLast();
        if (small != null && small.raw() != null) {
            b.append(String.format(Locale.ROOT, "ratio at %s (message rate): %.2f; at %s (bandwidth): %.2f",
                    StreamResult.bytes(small.size()), small.ratio(), StreamResult.bytes(large.size()), large.ratio()));
        }
        return b.toString();
    }
}
