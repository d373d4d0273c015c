package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * {@code bench fetch}: inference. Client threads pull batches of ids (Zipf 1.09, log-uniform
 * 16..4096 ids per request) from sharded parameter servers, on each transport in turn.
 */
@Command(name = "fetch",
        mixinStandardHelpOptions = true,
        description = {
            "Inference fetch: --clients threads pull batches of embedding rows from --servers server "
                    + "processes, on each of --transports in turn (warm-up, then a fixed measured interval).",
            "Prints mean/p50/p99/p99.9 latency, ops/s, keys/s and CPU per fetch over every process, with ratios "
                    + "to netty, one JSON line per transport, and writes reports/<date-time>/ with plots."},
        footer = {"", "Examples:",
                "  ferry bench fetch",
                "  ferry bench fetch --transports shm,netty --duration 5 --batch 256",
                "  ferry bench fetch --rate 2000 --distribution uniform",
                "  ferry bench fetch --transports shm,netty --pull-format f32,f16,bf16,int8"})
public final class FetchBenchmark implements Callable<Integer> {

    @Mixin
    FetchOptions options = new FetchOptions();

    @Spec
    CommandSpec spec;

    /** Runs {@code options} and returns the results, printing progress to {@code out}. */
    static List<RunResult> run(FetchOptions options, PrintStream out) {
        return run(options, out, new ArrayList<>());
    }

    /** {@link #run(FetchOptions, PrintStream)}; a transport whose run fails is named in {@code failed}, and the others still run. */
    static List<RunResult> run(FetchOptions options, PrintStream out, List<String> failed) {
        options.check();
        Netlab netlab = options.common.netlab() ? Netlab.open() : null;
        if (netlab != null) {
            out.println("network: netlab (" + netlab.settings() + "); one server in " + netlab.receiverNamespace()
                    + ", a worker process per sender namespace");
        }
        BenchDriver driver = new BenchDriver(out, netlab);
        if (options.interleave != null) {
            List<BenchTransport> transports = options.common.transportList();
            out.println("fetch on " + String.join(", ", transports.stream().map(BenchTransport::label).toList())
                    + ", interleaved in slices of " + options.interleave + " s ...");
            return driver.fetchInterleaved(options, transports, options.interleave);
        }
        List<RunResult> results = new ArrayList<>();
        int rounds = options.common.metricsRounds;
        for (BenchTransport transport : options.common.transportList()) {
            if (rounds == 0) {
                for (dev.ferry.ps.PullFormat format : options.formats()) {
                    String label = transport.label() + (format == dev.ferry.ps.PullFormat.F32 ? "" : "-" + format);
                    if (format != dev.ferry.ps.PullFormat.F32 && !transport.ferry()) {
                        out.println("fetch on " + label + ": skipped (pull formats are Ferry RPC's)");
                        continue;
                    }
                    for (int replicas : options.common.replicaRuns()) {
                        String named = BenchOptions.withReplicas(label, replicas);
                        out.println("fetch on " + named + " ...");
                        try {
                            results.add(driver.fetch(options, transport, options.common.metricsPort != null, format,
                                    replicas));
                        } catch (RuntimeException e) {
                            out.println("fetch on " + named + " FAILED: " + e.getMessage());
                            failed.add(named);
                        }
                    }
                }
                continue;
            }
            for (int r = 1; r <= rounds; r++) {
                out.println("fetch on " + transport.label() + ", metrics off, round " + r + " of " + rounds + " ...");
                results.add(driver.fetch(options, transport, false));
                out.println("fetch on " + transport.label() + ", metrics on and scraped every second, round " + r
                        + " of " + rounds + " ...");
                results.add(driver.fetch(options, transport, true));
            }
        }
        if (rounds > 0) {
            MetricsComparison.print(results, out);
        }
        return results;
    }

    @Override
    public Integer call() {
        List<String> failed = new ArrayList<>();
        List<List<RunResult>> all = BestOfRounds.run(options.common.rounds, System.out,
                () -> run(options, System.out, failed));
        List<RunResult> results = all.getLast();
        if (options.formats().size() > 1) {
            PullFormatReport.print(results, System.out);
        }
        if (!failed.isEmpty()) {
            System.out.println("failed (no row): " + String.join(", ", failed));
        }
        if (!options.common.noReport) {
            Path dir = Report.write(options.common.reportDir, "fetch", commandLine(spec), results);
            System.out.println("report" + (all.size() > 1 ? " (the last round)" : "") + ": " + dir.toAbsolutePath());
        }
        return !failed.isEmpty() || all.stream().flatMap(List::stream).anyMatch(r -> r.errors() > 0 || r.operations() == 0)
                ? 1 : 0;
    }

    /** The command as typed, for the report. */
    static String commandLine(CommandSpec spec) {
        String name = spec.qualifiedName();
        if (!name.startsWith("ferry")) {
            name = "ferry bench " + name;
        }
        List<String> args = spec.commandLine().getParseResult().originalArgs();
        // Under the CLI the arguments start with the subcommands' names, which the name has already.
        int from = 0;
        for (int k = 1; k <= args.size(); k++) {
            if (name.endsWith(" " + String.join(" ", args.subList(0, k)))) {
                from = k;
            }
        }
        args = args.subList(from, args.size());
        return args.isEmpty() ? name : name + " " + String.join(" ", args);
    }

    /** Runs from the command line. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new FetchBenchmark()).execute(args));
    }
}
