package dev.ferry.cli;

import dev.ferry.bench.pingpong.PingPongResult;
import dev.ferry.bench.pingpong.PingPongSpec;
import dev.ferry.bench.rpc.RpcBenchResult;
import dev.ferry.bench.rpc.RpcBenchSpec;
import dev.ferry.bench.rpc.RpcBenchmark;
import java.io.PrintWriter;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code ferry bench rpc}: RPC round trips and calls per second against a server child. */
@Command(name = "rpc",
        mixinStandardHelpOptions = true,
        description = {
            "RPC round trips between this process and a server child on 127.0.0.1: an echo method, the request "
                    + "and the response each --size bytes, --concurrency callers with one call outstanding each.",
            "Warms up (a time and a number of calls), then measures for a fixed time; a progress line goes to "
                    + "standard error every second.",
            "Prints calls per second and the round trip's mean, p50, p99 and p99.9 in microseconds "
                    + "(HdrHistogram); --json adds one JSON object as the last line.",
            "--compare-pingpong alternates --runs pairs of the raw ping-pong (bench pingpong, same transport and "
                    + "size) and this benchmark, and prints each pair's p50 ratio: the RPC's cost over the fabric's "
                    + "own round trip, both measured in the same minutes."})
final class RpcBenchCommand implements Callable<Integer> {

    /** Timed (and at least as many untimed) round trips of each ping-pong run in a comparison. */
    private static final int PINGPONG_ROUND_TRIPS = 20_000;

    @Spec
    private CommandSpec spec;

    @Option(names = {"-t", "--transport", "-p", "--provider"}, paramLabel = "<name>", defaultValue = "shm",
            description = "shm, tcp (libfabric providers) or netty (kernel TCP, the baseline). "
                    + "Default: ${DEFAULT-VALUE}.")
    private String transport;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "64", converter = ByteSize.class,
            description = "Request and response body size, such as 64, 4k, 1m (at most 16m). Default: ${DEFAULT-VALUE}.")
    private int size;

    @Option(names = {"-c", "--concurrency"}, paramLabel = "<n>", defaultValue = "1",
            description = "Caller threads, each with one call outstanding. Default: ${DEFAULT-VALUE}.")
    private int concurrency;

    @Option(names = "--warmup-ms", paramLabel = "<ms>", defaultValue = "2000",
            description = "Untimed calls first, for this long at least: the JIT compiles the call path on both sides. "
                    + "Default: ${DEFAULT-VALUE}.")
    private long warmupMillis;

    @Option(names = "--warmup-calls", paramLabel = "<n>", defaultValue = "200000",
            description = "And at least this many untimed calls (all callers), waited for at most 30 s past "
                    + "--warmup-ms: a cold pair of JVMs makes a few thousand calls a second. Default: ${DEFAULT-VALUE}.")
    private long warmupCalls;

    @Option(names = {"-d", "--duration-ms"}, paramLabel = "<ms>", defaultValue = "5000",
            description = "How long the timed part lasts. Default: ${DEFAULT-VALUE}.")
    private long durationMillis;

    @Option(names = "--timeout-ms", paramLabel = "<ms>", defaultValue = "10000",
            description = "Longest wait for the server to start, and the deadline of each call. Default: ${DEFAULT-VALUE}.")
    private long timeoutMillis;

    @Option(names = "--json", description = "Also print the result as one JSON object on the last line.")
    private boolean json;

    @Option(names = "--compare-pingpong",
            description = "Alternate --runs pairs: the raw ping-pong (same transport and size, 20,000 round trips "
                    + "after as many and --warmup-ms of warm-up), then this benchmark; print each pair's p50 ratio, "
                    + "the best and the median. One caller only.")
    private boolean comparePingPong;

    @Option(names = "--runs", paramLabel = "<n>", defaultValue = "3",
            description = "Pairs with --compare-pingpong. Default: ${DEFAULT-VALUE}.")
    private int runs;

    @Override
    public Integer call() {
        RpcBenchSpec rpc;
        PingPongSpec raw = null;
        try {
            rpc = new RpcBenchSpec(transport, size, concurrency, warmupMillis, warmupCalls, durationMillis,
                    timeoutMillis);
            if (comparePingPong) {
                if (concurrency != 1) {
                    throw new IllegalArgumentException("--compare-pingpong compares one caller with the ping-pong's "
                            + "one round trip at a time: drop --concurrency " + concurrency);
                }
                if (runs < 1 || runs > 100) {
                    throw new IllegalArgumentException("runs must be 1..100: " + runs);
                }
                raw = PingPongSpec.of(transport, null, size, PINGPONG_ROUND_TRIPS, PINGPONG_ROUND_TRIPS)
                        .withWarmupMillis(warmupMillis).withTimeoutMillis(timeoutMillis);
            }
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
        if (raw != null) {
            return compare(rpc, raw);
        }
        RpcBenchResult result = RpcBenchmark.run(rpc, spec.commandLine().getErr());
        PrintWriter out = spec.commandLine().getOut();
        out.println(result.text());
        if (json) {
            out.println(result.json());
        }
        out.flush();
        return 0;
    }

    /** {@code --compare-pingpong}: pairs of the raw ping-pong and the RPC, one after the other. */
    private int compare(RpcBenchSpec rpc, PingPongSpec raw) {
        PrintWriter out = spec.commandLine().getOut();
        double[] pingP50 = new double[runs];
        double[] rpcP50 = new double[runs];
        double[] ratios = new double[runs];
        for (int run = 0; run < runs; run++) {
            PingPongResult ping = PingPongCommand.newPingPong().run(raw);
            RpcBenchResult call = RpcBenchmark.run(rpc, spec.commandLine().getErr());
            pingP50[run] = ping.p50Us();
            rpcP50[run] = call.p50Us();
            ratios[run] = rpcP50[run] / pingP50[run];
            out.printf(Locale.ROOT, "pair %d/%d: pingpong p50 %.2f us (mean %.2f, p99 %.2f)   rpc p50 %.2f us "
                    + "(mean %.2f, p99 %.2f)   ratio %.2fx%n", run + 1, runs, ping.p50Us(), ping.meanUs(), ping.p99Us(),
                    call.p50Us(), call.meanUs(), call.p99Us(), ratios[run]);
            out.flush();
        }
        double[] sorted = ratios.clone();
        Arrays.sort(sorted);
        double median = runs % 2 == 1 ? sorted[runs / 2] : (sorted[runs / 2 - 1] + sorted[runs / 2]) / 2;
        out.printf(Locale.ROOT, "rpc p50 over pingpong p50, %s, %d B, %d pair%s: best %.2fx, median %.2fx, worst %.2fx%n",
                transport, size, runs, runs == 1 ? "" : "s", sorted[0], median, sorted[runs - 1]);
        if (json) {
            out.printf(Locale.ROOT, "{\"benchmark\":\"rpc-vs-pingpong\",\"provider\":\"%s\",\"size\":%d,\"runs\":%d,"
                    + "\"best_ratio\":%.3f,\"median_ratio\":%.3f,\"worst_ratio\":%.3f,\"pingpong_p50_us\":[%s],"
                    + "\"rpc_p50_us\":[%s],\"ratios\":[%s]}%n", transport, size, runs, sorted[0], median,
                    sorted[runs - 1], join(pingP50), join(rpcP50), join(ratios));
        }
        out.flush();
        return 0;
    }

    private static String join(double[] values) {
        return Arrays.stream(values).mapToObj(v -> String.format(Locale.ROOT, "%.3f", v))
                .collect(Collectors.joining(","));
    }
}
