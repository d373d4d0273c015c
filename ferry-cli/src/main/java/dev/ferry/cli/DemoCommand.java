package dev.ferry.cli;

import java.util.concurrent.Callable;

import dev.ferry.bench.ps.PsDemo;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * {@code ferry demo}: a local parameter-server cluster (two server processes) under an inference
 * fetch workload and a training push workload, on Ferry over shm and on the Netty kernel-TCP
 * baseline, in about a minute, ending with one table.
 */
@Command(name = "demo",
        mixinStandardHelpOptions = true,
        description = {"Starts two parameter-server processes on this machine and runs an inference fetch "
                + "workload (Zipf ids, batches of 16 to 4,096) and a training push workload against them, on "
                + "Ferry over shm and on the Netty kernel-TCP baseline, with a progress line; then prints "
                + "latency (mean, p50, p99) and throughput for each. About a minute.",
            "For the transports alone: ferry bench transports."})
final class DemoCommand implements Callable<Integer> {

    @Spec
    private CommandSpec spec;

    @Override
    public Integer call() {
        return PsDemo.run(PsDemo.Settings.defaults(), spec.commandLine().getOut(), spec.commandLine().getErr());
    }
}
