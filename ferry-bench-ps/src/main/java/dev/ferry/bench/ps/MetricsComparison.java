package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The summary of {@code --metrics-compare}: per transport, CPU per operation and throughput with
 * metrics off and on (the best of the alternating rounds of each), and their ratio.
 */
final class MetricsComparison {

    static final String SUFFIX = "+metrics";

    private MetricsComparison() {
    }

    static void print(List<RunResult> results, PrintStream out) {
        // Each round's on/off pair ran back to back: its ratio is the least disturbed by a load that drifts.
        List<Double> pairs = new java.util.ArrayList<>();
        for (int i = 0; i + 1 < results.size(); i++) {
            RunResult off = results.get(i);
            RunResult on = results.get(i + 1);
            if (!off.label().endsWith(SUFFIX) && on.label().equals(off.label() + SUFFIX)) {
                pairs.add(on.cpuMicrosPerOp() / off.cpuMicrosPerOp());
                i++;
            }
        }
        if (!pairs.isEmpty()) {
            List<Double> sorted = pairs.stream().sorted().toList();
            out.println();
            out.printf(Locale.ROOT, "cpu us/op on/off per round: %s; median %.3f%n", pairs.stream()
                    .map(r -> String.format(Locale.ROOT, "%.3f", r)).toList(), sorted.get(sorted.size() / 2));
        }
        Map<String, double[]> best = new LinkedHashMap<>(); // label -> {cpu us/op min, ops/s max, rounds}
        for (RunResult r : results) {
            double[] b = best.computeIfAbsent(r.label(), k -> new double[] {Double.MAX_VALUE, 0, 0});
            b[0] = Math.min(b[0], r.cpuMicrosPerOp());
            b[1] = Math.max(b[1], r.opsPerSecond());
            b[2]++;
        }
        out.println();
        out.println("metrics off vs on (scraped every second), best of each:");
        out.printf(Locale.ROOT, "  %-10s %14s %14s %8s %12s %12s %8s%n", "transport", "cpu us/op off", "cpu us/op on",
                "ratio", "ops/s off", "ops/s on", "ratio");
        for (Map.Entry<String, double[]> e : best.entrySet()) {
            if (e.getKey().endsWith(SUFFIX)) {
                continue;
            }
            double[] off = e.getValue();
            double[] on = best.get(e.getKey() + SUFFIX);
            if (on == null) {
                continue;
            }
            out.printf(Locale.ROOT, "  %-10s %14.2f %14.2f %8.3f %12.0f %12.0f %8.3f%n", e.getKey(), off[0], on[0],
                    on[0] / off[0], off[1], on[1], on[1] / off[1]);
        }
    }
}
