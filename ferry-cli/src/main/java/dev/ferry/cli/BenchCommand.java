package dev.ferry.cli;

import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/** {@code ferry bench}: the benchmarks. */
@Command(name = "bench",
        mixinStandardHelpOptions = true,
        description = "Runs a benchmark; each prints HdrHistogram latencies and can print JSON.",
        subcommands = {PingPongCommand.class, PingPongServerCommand.class, RpcBenchCommand.class, StreamCommand.class,
            TransportsCommand.class, ClusterFetchCommand.class,
            dev.ferry.bench.ps.FetchBenchmark.class, dev.ferry.bench.ps.PushBenchmark.class})
final class BenchCommand implements Runnable {

    @Spec
    private CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing benchmark: pingpong");
    }
}
