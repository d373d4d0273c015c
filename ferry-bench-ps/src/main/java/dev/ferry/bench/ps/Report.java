package dev.ferry.bench.ps;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.HdrHistogram.HistogramIterationValue;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * A benchmark's output: the table with ratios to {@code netty} on stdout, one JSON line per
 * transport, and a report directory {@code <dir>/<date-time>/} with {@code results.jsonl},
 * {@code summary.md} and PNG plots drawn with XChart (latency CDF on a log axis, latency bars,
 * CPU bars).
 */
final class Report {

    /** The baseline of the ratios. */
    static final String BASELINE = "netty";

    private Report() {
    }

    /** The baseline of {@code r}: netty with the same flow-control setting, else netty, else null. */
    static RunResult baseline(List<RunResult> results, RunResult r) {
        RunResult any = null;
        for (RunResult b : results) {
            if (b.transport().equals(BASELINE)) {
                if (b.flowControl() == r.flowControl()) {
                    return b;
                }
                if (any == null || b.flowControl()) {
                    any = b;
                }
            }
        }
        return any;
    }

    static String ratio(double value, double base) {
        return Double.isFinite(value) && Double.isFinite(base) && base > 0
                ? String.format(Locale.ROOT, "%.2fx", value / base) : "-";
    }

    /** The table, Markdown-compatible. */
    static List<String> table(List<RunResult> results) {
        List<String> lines = new ArrayList<>();
        lines.add(String.format(Locale.ROOT, "| %-10s | %9s | %9s | %9s | %9s | %10s | %11s | %8s | %6s | %6s | %6s | %6s |",
                "transport", "mean us", "p50 us", "p99 us", "p99.9 us", "ops/s", "keys/s", "cpu us/op",
                "mean", "p99", "p99.9", "cpu"));
        lines.add("|------------|----------:|----------:|----------:|----------:|-----------:|------------:|---------:"
                + "|-------:|-------:|-------:|-------:|");
        for (RunResult r : results) {
            RunResult b = baseline(results, r);
            lines.add(String.format(Locale.ROOT,
                    "| %-10s | %9.1f | %9.1f | %9.1f | %9.1f | %,10.0f | %,11.0f | %8.1f | %6s | %6s | %6s | %6s |",
                    r.label(), r.meanMicros(), r.percentileMicros(50), r.percentileMicros(99),
                    r.percentileMicros(99.9), r.opsPerSecond(), r.keysPerSecond(), r.cpuMicrosPerOp(),
                    b == null ? "-" : ratio(r.meanMicros(), b.meanMicros()),
                    b == null ? "-" : ratio(r.percentileMicros(99), b.percentileMicros(99)),
                    b == null ? "-" : ratio(r.percentileMicros(99.9), b.percentileMicros(99.9)),
                    b == null ? "-" : ratio(r.cpuMicrosPerOp(), b.cpuMicrosPerOp())));
        }
        return lines;
    }

    /** Prints the table and the JSON lines. */
    static void print(List<RunResult> results, PrintStream out) {
        out.println();
        out.println("ratios (last four columns) are to " + BASELINE + " (Ferry RPC over kernel TCP)");
        table(results).forEach(out::println);
        String steal = stealLine(results);
        if (steal != null) {
            out.println(steal);
        }
        List<String> floor = Floor.table(results);
        if (!floor.isEmpty()) {
            out.println();
            out.println("cost above the floor (direct: the same parameter-server work in one process, no RPC, "
                    + "timed by its threads' CPU time); ratios are layer to netty's layer");
            floor.forEach(out::println);
        }
        List<String> network = networkTable(results);
        if (!network.isEmpty()) {
            out.println();
            out.println("the emulated network over each measured interval (bin/netlab; drops outside the bottleneck "
                    + "distort a run)");
            network.forEach(out::println);
        }
        out.println();
        results.forEach(r -> out.println(json(results, r)));
    }

    /**
     * The share of the cores other guests of the host took over each measured interval, those
     * above {@link HostSteal#DISTURBED} marked; null where none was recorded (not Linux).
     */
    static String stealLine(List<RunResult> results) {
        StringBuilder s = new StringBuilder();
        for (RunResult r : results) {
            double share = HostSteal.of(r);
            if (Double.isFinite(share)) {
                s.append(s.isEmpty() ? "" : ", ").append(r.label()).append(' ')
                        .append(String.format(Locale.ROOT, "%.1f%%", 100 * share))
                        .append(HostSteal.disturbed(r) ? " (disturbed)" : "");
            }
        }
        return s.isEmpty() ? null : "host steal over each measured interval: " + s;
    }

    /** Drops, retransmissions and timeouts per run on the emulated network; empty on loopback. */
    static List<String> networkTable(List<RunResult> results) {
        List<String> lines = new ArrayList<>();
        if (results.stream().noneMatch(r -> r.counters().containsKey("net_bottleneck_drops"))) {
            return lines;
        }
        // Push steps: the measured step beside its two lower bounds (StepBounds).
        boolean steps = results.stream().anyMatch(r -> r.counters().containsKey("step_cpu_floor_us"));
        lines.add("| transport  | bottleneck drops | TCP retrans segs | TCP timeouts (RTO) | other drops | softnet drops |"
                + (steps ? " step ms | on the wire ms | CPU / cores ms |" : ""));
        lines.add("|------------|-----------------:|-----------------:|-------------------:|------------:|--------------:|"
                + (steps ? "--------:|--------------:|---------------:|" : ""));
        for (RunResult r : results) {
            Map<String, Long> c = r.counters();
            String row = String.format(Locale.ROOT, "| %-10s | %,16d | %,16d | %,18d | %,11d | %,13d |", r.label(),
                    c.getOrDefault("net_bottleneck_drops", 0L), c.getOrDefault("net_tcp_retrans_segs", 0L),
                    c.getOrDefault("net_tcp_timeouts", 0L), c.getOrDefault("net_other_drops", 0L),
                    c.getOrDefault("net_softnet_drops", 0L));
            if (steps) {
                // StepBounds puts both bounds only on a run with steps.
                row += c.containsKey("step_cpu_floor_us")
                        ? String.format(Locale.ROOT, " %7.1f | %13.1f | %14.1f |", r.steps().getMean() / 1e6,
                                c.get("step_wire_us") / 1e3, c.get("step_cpu_floor_us") / 1e3)
                        : "       - |             - |              - |";
            }
            lines.add(row);
        }
        return lines;
    }

    /** The JSON line of {@code r}, with its floor and layer costs when the run has a floor. */
    static String json(List<RunResult> results, RunResult r) {
        return r.json(Floor.fields(results, r));
    }

    /** Writes {@code <dir>/<date-time>/}; returns it. */
    static Path write(Path dir, String workload, String command, List<RunResult> results) {
        Path report = dir.resolve(LocalDateTime.now().format(DateTimeFormatter.ofPattern("yyyyMMdd-HHmmss")));
        try {
            Files.createDirectories(report);
            List<String> json = results.stream().map(r -> json(results, r)).toList();
            Files.write(report.resolve(workload + ".jsonl"), json);
            Files.write(report.resolve(workload + ".md"), markdown(workload, command, results));
            plots(report, workload, results);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the report in " + report, e);
        }
        return report;
    }

    static List<String> markdown(String workload, String command, List<RunResult> results) {
        List<String> md = new ArrayList<>();
        md.add("# " + workload);
        md.add("");
        md.add("`" + command + "`");
        md.add("");
        md.add("Latency in microseconds; ratios are to " + BASELINE + " (Ferry RPC over kernel TCP) with the same "
                + "flow-control setting; CPU is user+system time of every client and server process in the "
                + "measured interval, per operation.");
        md.add("");
        md.addAll(table(results));
        md.add("");
        List<String> floor = Floor.table(results);
        if (!floor.isEmpty()) {
            md.add("Cost above the floor: each row minus the `direct` row (the same parameter-server work in one "
                    + "process: plan, gather or apply, scatter; no RPC, no transport; in the closed loop its latency "
                    + "is its threads' CPU time); ratios are that layer to netty's layer.");
            md.add("");
            md.addAll(floor);
            md.add("");
            for (String name : List.of("mean", "p99", "cpu")) {
                md.add("![floor and layer, " + name + "](" + workload + "-floor-" + name + ".png)");
            }
            md.add("");
        }
        List<String> network = networkTable(results);
        if (!network.isEmpty()) {
            md.add("The emulated network (bin/netlab, docs/netlab.md) over each measured interval; drops outside the "
                    + "bottleneck, or softnet drops, mean the run is distorted:");
            md.add("");
            md.addAll(network);
            md.add("");
        }
        md.add("Counters (clients and servers; totals summed, peaks the maximum over processes):");
        md.add("");
        for (RunResult r : results) {
            StringBuilder s = new StringBuilder("- **" + r.label() + "**: ");
            s.append(String.format(Locale.ROOT, "%,d ops in %.1f s, %d errors", r.operations(), r.seconds(),
                    r.errors()));
            if (r.steps() != null && r.steps().getTotalCount() > 0) {
                s.append(String.format(Locale.ROOT, "; step mean %.0f us, p99 %.0f us over %d steps",
                        r.steps().getMean() / 1e3, r.steps().getValueAtPercentile(99) / 1e3, r.steps().getTotalCount()));
            }
            r.counters().forEach((k, v) -> {
                if (k.contains("peak") || k.contains("stall") || k.contains("queue") || k.contains("rendezvous")
                        || k.contains("eager")) {
                    s.append("; ").append(k).append(' ').append(v);
                }
            });
            md.add(s.toString());
        }
        md.add("");
        md.add("![latency CDF](" + workload + "-cdf.png)");
        md.add("![latency](" + workload + "-latency.png)");
        md.add("![CPU per operation](" + workload + "-cpu.png)");
        return md;
    }

    static void plots(Path dir, String workload, List<RunResult> results) throws IOException {
        System.setProperty("java.awt.headless", "true");
        XYChart cdf = new XYChartBuilder().width(900).height(560)
                .title(workload + ": latency CDF").xAxisTitle("latency (us, log)").yAxisTitle("fraction of requests")
                .build();
        cdf.getStyler().setXAxisLogarithmic(true);
        cdf.getStyler().setLegendPosition(Styler.LegendPosition.InsideSE);
        cdf.getStyler().setChartBackgroundColor(Color.WHITE);
        for (RunResult r : results) {
            List<Double> x = new ArrayList<>();
            List<Double> y = new ArrayList<>();
            long total = r.latency().getTotalCount();
            if (total == 0) {
                continue;
            }
            for (HistogramIterationValue v : r.latency().percentiles(5)) {
                x.add(Math.max(1.0, v.getValueIteratedTo() / 1e3));
                y.add(v.getPercentileLevelIteratedTo() / 100.0);
            }
            XYSeries s = cdf.addSeries(r.label(), x, y);
            s.setMarker(SeriesMarkers.NONE);
            s.setLineStyle(new BasicStroke(2f));
        }
        BitmapEncoder.saveBitmap(cdf, dir.resolve(workload + "-cdf").toString(), BitmapEncoder.BitmapFormat.PNG);

        List<String> labels = results.stream().map(RunResult::label).toList();
        CategoryChart latency = new CategoryChartBuilder().width(900).height(560)
                .title(workload + ": latency").xAxisTitle("transport").yAxisTitle("us").build();
        latency.getStyler().setChartBackgroundColor(Color.WHITE);
        latency.getStyler().setLegendPosition(Styler.LegendPosition.InsideNW);
        latency.addSeries("mean", labels, results.stream().map(RunResult::meanMicros).toList());
        latency.addSeries("p50", labels, results.stream().map(r -> r.percentileMicros(50)).toList());
        latency.addSeries("p99", labels, results.stream().map(r -> r.percentileMicros(99)).toList());
        latency.addSeries("p99.9", labels, results.stream().map(r -> r.percentileMicros(99.9)).toList());
        BitmapEncoder.saveBitmap(latency, dir.resolve(workload + "-latency").toString(),
                BitmapEncoder.BitmapFormat.PNG);

        CategoryChart cpu = new CategoryChartBuilder().width(900).height(560)
                .title(workload + ": CPU per operation, all processes").xAxisTitle("transport").yAxisTitle("CPU us / op")
                .build();
        cpu.getStyler().setChartBackgroundColor(Color.WHITE);
        cpu.getStyler().setLegendVisible(false);
        cpu.addSeries("cpu", labels, results.stream().map(r -> {
            double v = r.cpuMicrosPerOp();
            return Double.isFinite(v) ? v : 0.0;
        }).toList());
        BitmapEncoder.saveBitmap(cpu, dir.resolve(workload + "-cpu").toString(), BitmapEncoder.BitmapFormat.PNG);
        Floor.plots(dir, workload, results);
    }
}
