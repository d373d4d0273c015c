package dev.ferry.bench.ps;

import java.awt.Color;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.style.Styler;

/**
 * What each transport costs above the floor: the {@code direct} row of the same run does the
 * same parameter-server work in one process with no RPC and no transport, so a row's mean, p99
 * and CPU per operation minus the floor's is what its layers (client and server RPC, transport,
 * threads, the network) add. The layer of each row is also given as a ratio to Netty's layer
 * (the baseline with the same flow-control setting).
 */
final class Floor {

    private Floor() {
    }

    /** The floor of a run: its {@code direct} result, or null if the run has none. */
    static RunResult of(List<RunResult> results) {
        for (RunResult r : results) {
            if (r.transport().equals(BenchTransport.FLOOR)) {
                return r;
            }
        }
        return null;
    }

    static double layerMean(RunResult r, RunResult floor) {
        return r.meanMicros() - floor.meanMicros();
    }

    static double layerP99(RunResult r, RunResult floor) {
        return r.percentileMicros(99) - floor.percentileMicros(99);
    }

    static double layerCpu(RunResult r, RunResult floor) {
        return r.cpuMicrosPerOp() - floor.cpuMicrosPerOp();
    }

    /** The JSON fields of {@code r}'s floor and layer (empty without a floor). */
    static Map<String, Object> fields(List<RunResult> results, RunResult r) {
        Map<String, Object> f = new LinkedHashMap<>();
        RunResult floor = of(results);
        if (floor == null) {
            return f;
        }
        f.put("floor_mean_us", floor.meanMicros());
        f.put("floor_p99_us", floor.percentileMicros(99));
        f.put("floor_cpu_us_per_op", floor.cpuMicrosPerOp());
        f.put("layer_mean_us", layerMean(r, floor));
        f.put("layer_p99_us", layerP99(r, floor));
        f.put("layer_cpu_us_per_op", layerCpu(r, floor));
        RunResult b = Report.baseline(results, r);
        if (b != null) {
            f.put("layer_mean_vs_netty", quotient(layerMean(r, floor), layerMean(b, floor)));
            f.put("layer_p99_vs_netty", quotient(layerP99(r, floor), layerP99(b, floor)));
            f.put("layer_cpu_vs_netty", quotient(layerCpu(r, floor), layerCpu(b, floor)));
        }
        return f;
    }

    /** {@code value / base}, or NaN where either is not finite or the base is not positive. */
    static double quotient(double value, double base) {
        return Double.isFinite(value) && Double.isFinite(base) && base > 0 ? value / base : Double.NaN;
    }

    /** The table of layer costs, Markdown-compatible; empty without a floor. */
    static List<String> table(List<RunResult> results) {
        List<String> lines = new ArrayList<>();
        RunResult floor = of(results);
        if (floor == null) {
            return lines;
        }
        lines.add(String.format(Locale.ROOT, "| %-12s | %13s | %12s | %14s | %10s | %10s | %10s |",
                "above direct", "mean us", "p99 us", "cpu us/op", "mean/netty", "p99/netty", "cpu/netty"));
        lines.add("|--------------|--------------:|-------------:|---------------:|-----------:|-----------:|-----------:|");
        for (RunResult r : results) {
            if (r == floor) {
                continue;
            }
            RunResult b = Report.baseline(results, r);
            lines.add(String.format(Locale.ROOT, "| %-12s | %13.1f | %12.1f | %14.1f | %10s | %10s | %10s |",
                    r.label(), layerMean(r, floor), layerP99(r, floor), layerCpu(r, floor),
                    b == null ? "-" : Report.ratio(layerMean(r, floor), layerMean(b, floor)),
                    b == null ? "-" : Report.ratio(layerP99(r, floor), layerP99(b, floor)),
                    b == null ? "-" : Report.ratio(layerCpu(r, floor), layerCpu(b, floor))));
        }
        return lines;
    }

    /**
     * Stacked bars per transport, floor plus layer, of mean latency, p99 and CPU per operation:
     * {@code <workload>-floor-mean.png}, {@code -floor-p99.png}, {@code -floor-cpu.png}. A layer
     * below 0 (a row under the floor, noise) is drawn as 0 on a floor cut to the row's value.
     */
    static List<String> plots(Path dir, String workload, List<RunResult> results) throws IOException {
        List<String> files = new ArrayList<>();
        RunResult floor = of(results);
        if (floor == null) {
            return files;
        }
        files.add(plot(dir, workload, "mean", "mean latency (us)", results, floor, RunResult::meanMicros));
        files.add(plot(dir, workload, "p99", "p99 latency (us)", results, floor, r -> r.percentileMicros(99)));
        files.add(plot(dir, workload, "cpu", "CPU per operation, all processes (us)", results, floor,
                RunResult::cpuMicrosPerOp));
        return files;
    }

    private static String plot(Path dir, String workload, String name, String axis, List<RunResult> results,
            RunResult floor, ToDoubleFunction<RunResult> metric) throws IOException {
        List<String> labels = new ArrayList<>();
        List<Double> bottom = new ArrayList<>();
        List<Double> top = new ArrayList<>();
        double base = finite(metric.applyAsDouble(floor));
        for (RunResult r : results) {
            double total = finite(metric.applyAsDouble(r));
            labels.add(r.label());
            bottom.add(Math.min(base, total));
            top.add(Math.max(0, total - base));
        }
        CategoryChart chart = new CategoryChartBuilder().width(900).height(560)
                .title(workload + ": " + axis + ", the floor (direct) and the layer above it")
                .xAxisTitle("transport").yAxisTitle(axis).build();
        chart.getStyler().setStacked(true);
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNW);
        chart.addSeries("floor: parameter-server work (direct)", labels, bottom);
        chart.addSeries("layer: RPC, transport, threads", labels, top);
        String file = workload + "-floor-" + name;
        BitmapEncoder.saveBitmap(chart, dir.resolve(file).toString(), BitmapEncoder.BitmapFormat.PNG);
        return file + ".png";
    }

    private static double finite(double v) {
        return Double.isFinite(v) ? v : 0.0;
    }
}
