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
 * {@code bench push}: training. Workers push gradient batches in synchronized steps (a barrier per
 * step across all worker processes, so every push of a step arrives at once: incast), on each
 * transport in turn, with Ferry's flow control on and off.
 */
@Command(name = "push",
        mixinStandardHelpOptions = true,
        description = {
            "Training push: --workers threads in --worker-processes processes push a gradient batch "
                    + "each (--batch ids x --dimension floats) in synchronized steps into --servers server processes "
                    + "(a workers:1 incast per server), on each of --transports in turn.",
            "Prints the push latency per step (mean/p50/p99/p99.9), pushes/s, keys/s, CPU per push over every "
                    + "process, the servers' peak queued requests and bytes and the transports' flow-control "
                    + "counters, with ratios to netty; --flow-control both runs Ferry transports with their send "
                    + "windows and credits on, then off."},
        footer = {"", "Examples:",
                "  ferry bench push",
                "  ferry bench push --transports shm,netty --flow-control on --duration 5",
                "  ferry bench push --workers 32 --worker-processes 4 --batch 1024"})
public final class PushBenchmark implements Callable<Integer> {

    @Mixin
    PushOptions options = new PushOptions();

    @Spec
    CommandSpec spec;

    /** Runs {@code options} and returns the results, printing progress to {@code out}. */
    static List<RunResult> run(PushOptions options, PrintStream out) {
        return run(options, out, new ArrayList<>());
    }

    /** {@link #run(PushOptions, PrintStream)}; a transport whose run fails is named in {@code failed}, and the others still run. */
    static List<RunResult> run(PushOptions options, PrintStream out, List<String> failed) {
        options.check();
        Netlab netlab = options.common.netlab() ? Netlab.open() : null;
        if (netlab != null) {
            out.println("network: netlab (" + netlab.settings() + "); one server in " + netlab.receiverNamespace()
                    + ", a worker process per sender namespace");
        }
        BenchDriver driver = new BenchDriver(out, netlab);
        List<RunResult> results = new ArrayList<>();
        for (boolean flowControl : options.flowControlModes()) {
            for (BenchTransport transport : options.common.transportList()) {
                if (!transport.ferry() && !flowControl && options.flowControlModes().length > 1) {
                    continue;
                }
                for (int replicas : options.common.replicaRuns()) {
                    String label = BenchOptions.withReplicas(transport.label(), replicas)
                            + (flowControl ? "" : " without flow control");
                    out.println("push on " + label + " ...");
                    try {
                        results.add(driver.push(options, transport, flowControl, replicas));
                    } catch (RuntimeException e) {
                        out.println("push on " + label + " FAILED: " + e.getMessage());
                        failed.add(label);
                    }
                }
            }
        }
        return results;
    }

    @Override
    public Integer call() {
        List<String> failed = new ArrayList<>();
        List<List<RunResult>> all = BestOfRounds.run(options.common.rounds, System.out,
                () -> run(options, System.out, failed));
        List<RunResult> results = all.getLast();
        if (!failed.isEmpty()) {
            System.out.println("failed (no row): " + String.join(", ", failed));
        }
        if (!options.common.noReport) {
            Path dir = Report.write(options.common.reportDir, "push", FetchBenchmark.commandLine(spec), results);
            System.out.println("report" + (all.size() > 1 ? " (the last round)" : "") + ": " + dir.toAbsolutePath());
        }
        return !failed.isEmpty() || all.stream().flatMap(List::stream).anyMatch(r -> r.errors() > 0 || r.operations() == 0)
                ? 1 : 0;
    }

    /** Runs from the command line. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new PushBenchmark()).execute(args));
    }
}
