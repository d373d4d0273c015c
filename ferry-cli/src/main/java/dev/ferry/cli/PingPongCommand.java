package dev.ferry.cli;

import dev.ferry.bench.pingpong.CPingPong;
import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.bench.pingpong.PingPongResult;
import dev.ferry.bench.pingpong.PingPongSpec;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code ferry bench pingpong}: round-trip latency between two processes on this host. */
@Command(name = "pingpong",
        mixinStandardHelpOptions = true,
        description = {
            "Round-trip latency between this process and a server child on 127.0.0.1.",
            "Over libfabric (shm, tcp, ...): receives posted ahead, inject for small messages, the completion "
                    + "queue busy-polled, the two pollers pinned to different CPUs. Over netty: the same through "
                    + "the transport API on kernel TCP, the baseline.",
            "Prints mean, p50, p99 and p99.9 in microseconds; --json adds one JSON object as the last line."})
final class PingPongCommand implements Callable<Integer> {

    @Spec
    private CommandSpec spec;

    @Option(names = {"-p", "--provider", "--transport"}, paramLabel = "<name>", defaultValue = "shm",
            description = "shm, tcp (libfabric providers; also verbs, efa, ... where installed) or netty "
                    + "(kernel TCP through the transport API). Default: ${DEFAULT-VALUE}.")
    private String provider;

    @Option(names = {"-e", "--endpoint"}, paramLabel = "msg|rdm",
            description = "libfabric endpoint type. Default: msg for tcp and verbs, rdm otherwise.")
    private String endpoint;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "64", converter = ByteSize.class,
            description = "Message size each way, such as 64, 4k, 1m (at most 64m). Default: ${DEFAULT-VALUE}.")
    private int size;

    @Option(names = {"-n", "--iterations"}, paramLabel = "<n>", defaultValue = "20000",
            description = "Timed round trips. Default: ${DEFAULT-VALUE}.")
    private int iterations;

    @Option(names = {"-w", "--warmup"}, paramLabel = "<n>", defaultValue = "20000",
            description = "Untimed round trips first, at least. Default: ${DEFAULT-VALUE}.")
    private int warmup;

    @Option(names = "--warmup-ms", paramLabel = "<ms>", defaultValue = "2000",
            description = "How long the warm-up lasts at least: the JIT compiles for a while, on the pollers' "
                    + "CPUs. Default: ${DEFAULT-VALUE}.")
    private long warmupMillis;

    @Option(names = "--json", description = "Also print the result as one JSON object on the last line.")
    private boolean json;

    @Option(names = "--compare-c",
            description = "Alternate runs with libfabric's C fi_pingpong (same provider, endpoint, size and "
                    + "iterations) and print the best means and their ratio.")
    private boolean compareC;

    @Option(names = "--runs", paramLabel = "<n>", defaultValue = "3",
            description = "Runs of each side with --compare-c; the best mean counts. Default: ${DEFAULT-VALUE}.")
    private int runs;

    @Option(names = "--pin", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "Pin the client and server pollers to different CPUs (when there are two). Default: on.")
    private boolean pin;

    @Option(names = "--timeout-ms", paramLabel = "<ms>", defaultValue = "10000",
            description = "Longest wait for the server to start or for any one reply. Default: ${DEFAULT-VALUE}.")
    private long timeoutMillis;

    @Override
    public Integer call() {
        PingPongSpec pingPong = spec();
        if (compareC) {
            return compare(pingPong);
        }
        PingPongResult result = newPingPong().run(pingPong);
        PrintWriter out = spec.commandLine().getOut();
        out.println(result.text());
        if (json) {
            out.println(result.json());
        }
        out.flush();
        return 0;
    }

    private PingPongSpec spec() {
        try {
            if (compareC && provider.equalsIgnoreCase(PingPongSpec.NETTY)) {
                throw new IllegalArgumentException("--compare-c compares libfabric providers with fi_pingpong, not netty");
            }
            if (runs <= 0) {
                throw new IllegalArgumentException("runs must be positive: " + runs);
            }
            return PingPongSpec.of(provider, endpoint, size, iterations, warmup).withWarmupMillis(warmupMillis)
                    .withPin(pin).withTimeoutMillis(timeoutMillis);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
    }

    /** The benchmark with this launcher's hidden server subcommand as the child's body. */
    static PingPong newPingPong() {
        return new PingPong(FerryCommand.class.getName(), List.of("bench", PingPongServerCommand.NAME));
    }

    private int compare(PingPongSpec pingPong) {
        if (!CPingPong.available()) {
            throw new IllegalStateException(CPingPong.TOOL + " is not on the PATH (Debian package libfabric-bin)");
        }
        PrintWriter out = spec.commandLine().getOut();
        PingPong ferry = newPingPong();
        List<PingPongResult> ferryRuns = new ArrayList<>();
        List<Double> cRuns = new ArrayList<>();
        for (int run = 1; run <= runs; run++) {
            PingPongResult r = ferry.run(pingPong);
            ferryRuns.add(r);
            double c = CPingPong.meanRoundTripMicros(pingPong);
            cRuns.add(c);
            out.printf(Locale.ROOT, "run %d/%d: ferry mean %.2f us (p50 %.2f, p99 %.2f)   fi_pingpong mean %.2f us%n",
                    run, runs, r.meanUs(), r.p50Us(), r.p99Us(), c);
            out.flush();
        }
        PingPongResult best = ferryRuns.stream().min((a, b) -> Double.compare(a.meanUs(), b.meanUs())).orElseThrow();
        double bestC = cRuns.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
        double ratio = best.meanUs() / bestC;
        out.printf(Locale.ROOT, "%s, best of %d: ferry %.2f us, fi_pingpong %.2f us (2 x usec/xfer), ratio %.2f%n",
                pingPong.label(), runs, best.meanUs(), bestC, ratio);
        out.println(best.text());
        if (json) {
            out.printf(Locale.ROOT, "{%s,\"runs\":%d,\"c_mean_us\":%.3f,\"ratio\":%.3f,\"ferry_means_us\":[%s],"
                    + "\"c_means_us\":[%s]}%n", best.jsonFields(), runs, bestC, ratio,
                    ferryRuns.stream().map(r -> String.format(Locale.ROOT, "%.3f", r.meanUs()))
                            .collect(Collectors.joining(",")),
                    cRuns.stream().map(c -> String.format(Locale.ROOT, "%.3f", c)).collect(Collectors.joining(",")));
        }
        out.flush();
        return 0;
    }
}
