package dev.ferry.cli;

import dev.ferry.bench.rpc.RpcBenchResult;
import dev.ferry.bench.rpc.RpcBenchSpec;
import dev.ferry.bench.rpc.RpcBenchmark;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
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
                    + "(HdrHistogram); --json adds one JSON object as the last line."})
final class RpcBenchCommand implements Callable<Integer> {

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

    @Override
    public Integer call() {
        RpcBenchSpec rpc;
        try {
            rpc = new RpcBenchSpec(transport, size, concurrency, warmupMillis, warmupCalls, durationMillis,
                    timeoutMillis);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
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
}
