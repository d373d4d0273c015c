package dev.ferry.microbench;

import java.util.Collection;
import java.util.Locale;
import java.util.Map;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.CommandLineOptionException;
import org.openjdk.jmh.runner.options.CommandLineOptions;
import org.openjdk.jmh.runner.options.OptionsBuilder;

/**
 * Runs the benchmarks with JMH's own command line (a regular expression, {@code -f}, {@code -wi},
 * {@code -i}, {@code -prof gc}, ...) and {@link CpuTimeProfiler}, then prints a table of wall and
 * CPU time per unit and the bytes per second of CPU time that it moves, so that each row stands
 * beside the {@code copyLimit} of its class.
 */
public final class MicroBench {

    /** Unit of one operation, and the bytes it moves (0: not a bandwidth figure). */
    private record Unit(String name, double bytes) {
    }

    private static final double ROW = 64 * Float.BYTES;

    private static final Map<String, Unit> UNITS = Map.of(
            "PlanBenchmark", new Unit("id", 0),
            "GatherBenchmark", new Unit("row", ROW),
            "GradientBenchmark", new Unit("id", ROW),
            "OptimizerBenchmark", new Unit("element", 0),
            "InProcessBenchmark", new Unit("request", 0));

    private MicroBench() {
    }

    /** JMH's arguments; no argument runs every benchmark. */
    public static void main(String[] args) throws RunnerException, CommandLineOptionException {
        Collection<RunResult> results = new Runner(new OptionsBuilder().parent(new CommandLineOptions(args))
                .addProfiler(CpuTimeProfiler.class).build()).run();
        System.out.println();
        System.out.printf(Locale.ROOT, "%-36s %-10s %16s %9s %-12s %8s%n", "benchmark", "params", "wall", "cpu", "unit",
                "GB/s");
        for (RunResult run : results) {
            String label = run.getParams().getBenchmark();
            String simple = label.substring(label.lastIndexOf('.', label.lastIndexOf('.') - 1) + 1);
            String type = simple.substring(0, simple.indexOf('.'));
            Unit unit = UNITS.getOrDefault(type, new Unit("op", 0));
            StringBuilder params = new StringBuilder();
            for (String key : run.getParams().getParamsKeys()) {
                params.append(params.isEmpty() ? "" : ",").append(run.getParams().getParam(key));
            }
            Result<?> primary = run.getPrimaryResult();
            double bytes = unit.bytes();
            if (type.equals("OptimizerBenchmark")) {
                bytes = optimizerBytes(run.getParams().getParam("optimizer"));
            }
            String timeUnit = primary.getScoreUnit().replace("/op", "/" + unit.name());
            Result<?> cpu = run.getSecondaryResults().get("cpu");
            double cpuScore = cpu == null ? primary.getScore() : cpu.getScore();
            double nanos = cpuScore * (primary.getScoreUnit().startsWith("us") ? 1e3 : 1);
            System.out.printf(Locale.ROOT, "%-36s %-10s %8.2f ±%6.2f %9.2f %-12s %8s%n", simple, params,
                    primary.getScore(), primary.getScoreError(), cpuScore, timeUnit,
                    bytes > 0 ? String.format(Locale.ROOT, "%.1f", bytes / nanos) : "-");
        }
    }

    /** Bytes a step touches per element: the gradient, the weight and its state. */
    private static double optimizerBytes(String optimizer) {
        int slots = switch (optimizer) {
            case "sgd" -> 0;
            case "adagrad" -> 1;
            default -> 2;
        };
        return Float.BYTES * (2 + slots);
    }
}
