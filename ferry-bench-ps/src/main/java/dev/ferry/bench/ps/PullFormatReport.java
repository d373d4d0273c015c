package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.util.List;
import java.util.Locale;

/**
 * {@code bench fetch --pull-format}: per transport and format, the bytes the client received per
 * fetch and per key (answers on the wire: rows, RPC and transport headers) and the latency, each
 * with its ratio to the same transport's f32 run of the same invocation.
 */
final class PullFormatReport {

    private PullFormatReport() {
    }

    static void print(List<RunResult> results, PrintStream out) {
        out.println();
        out.println("pull formats: received bytes per fetch and latency; ratios to the same transport's f32 run");
        out.println(String.format(Locale.ROOT, "| %-12s | %12s | %9s | %8s | %9s | %9s | %8s | %8s |", "run",
                "bytes/fetch", "bytes/key", "bytes", "mean us", "p99 us", "mean", "p99"));
        out.println("|--------------|--------------|-----------|----------|-----------|-----------|----------|----------|");
        for (RunResult r : results) {
            RunResult base = f32Of(results, r);
            out.println(String.format(Locale.ROOT, "| %-12s | %,12.0f | %9.1f | %8s | %9.1f | %9.1f | %8s | %8s |",
                    r.label(), bytesPerFetch(r), bytesPerFetch(r) * r.operations() / Math.max(1, r.keys()),
                    base == null ? "-" : Report.ratio(bytesPerFetch(r), bytesPerFetch(base)), r.meanMicros(),
                    r.percentileMicros(99), base == null ? "-" : Report.ratio(r.meanMicros(), base.meanMicros()),
                    base == null ? "-" : Report.ratio(r.percentileMicros(99), base.percentileMicros(99))));
        }
    }

    static double bytesPerFetch(RunResult r) {
        Long bytes = r.counters().get("measured_rx_bytes");
        return bytes == null || r.operations() == 0 ? Double.NaN : (double) bytes / r.operations();
    }

    /** The f32 run of {@code r}'s transport: the result labelled with the part before the format. */
    private static RunResult f32Of(List<RunResult> results, RunResult r) {
        String transport = r.transport();
        int dash = transport.lastIndexOf('-');
        String plain = dash > 0 && isFormat(transport.substring(dash + 1)) ? transport.substring(0, dash) : transport;
        for (RunResult b : results) {
            if (b.transport().equals(plain) && b.flowControl() == r.flowControl()) {
                return b;
            }
        }
        return null;
    }

    private static boolean isFormat(String name) {
        for (dev.ferry.ps.PullFormat f : dev.ferry.ps.PullFormat.values()) {
            if (f.toString().equals(name)) {
                return true;
            }
        }
        return false;
    }
}
