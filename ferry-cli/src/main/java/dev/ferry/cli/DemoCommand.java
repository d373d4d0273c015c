package dev.ferry.cli;

import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

import dev.ferry.bench.ps.PsDemo;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code ferry demo}: a parameter-server cluster on an embedded ZooKeeper (three server processes
 * that join it), under an inference fetch workload and a training push workload, on Ferry over
 * shm and on the Netty kernel-TCP baseline; on the first, a server joins and one leaves while an
 * exactly checked training workload runs. About two minutes, ending with one table and the check.
 */
@Command(name = "demo",
        mixinStandardHelpOptions = true,
        description = {"Starts ZooKeeper (embedded) and three parameter-server processes that join it, connects a "
                + "client through the cluster's address and runs an inference fetch workload (Zipf ids, batches of "
                + "16 to 4,096) and a training push workload, with a progress line. Then, while two threads push "
                + "exact integer gradients, one server joins and one leaves: each generation and slot move is "
                + "printed, and at the end every row is checked against the exact sum of the acknowledged pushes. "
                + "The same fetch and push workloads run again on the Netty kernel-TCP baseline; the table gives "
                + "latency (mean, p50, p99) and throughput for each, each phase timed once its workload has settled. "
                + "About two minutes; every process it starts is "
                + "stopped at the end, on failure and on Ctrl-C.",
            "For the transports alone: ferry bench transports."})
final class DemoCommand implements Callable<Integer> {

    @Spec
    private CommandSpec spec;

    @Option(names = "--servers", paramLabel = "<n>", defaultValue = "3",
            description = "Server processes each cluster starts with. Default: ${DEFAULT-VALUE}.")
    int servers;

    @Option(names = "--transports", paramLabel = "<label=provider>", split = ",",
            defaultValue = "Ferry-shm=shm,Netty-TCP=netty",
            description = "Transports, each label=provider (shm, tcp, netty); the cluster changes on the first that starts. "
                    + "Default: ${DEFAULT-VALUE}.")
    List<String> transports;

    @Option(names = "--warmup-ms", paramLabel = "<ms>", defaultValue = "2000",
            description = "Untimed traffic before the timed phases. Default: ${DEFAULT-VALUE}.")
    long warmupMillis;

    @Option(names = "--settle-ms", paramLabel = "<ms>", defaultValue = "20000",
            description = "Before each timed phase its workload runs untimed, a second at a time, until three seconds in "
                    + "a row agree within a tenth in calls per second (the JVMs have compiled its path), at most this "
                    + "long; 0 times each phase right after the warm-up. Default: ${DEFAULT-VALUE}.")
    long settleMillis;

    @Option(names = "--phase-ms", paramLabel = "<ms>", defaultValue = "6000",
            description = "Length of the fetch and of the push phase. Default: ${DEFAULT-VALUE}.")
    long phaseMillis;

    @Option(names = "--ids", paramLabel = "<n>", defaultValue = "1048576",
            description = "Id space of the fetch and push workloads. Default: ${DEFAULT-VALUE}.")
    int ids;

    @Option(names = "--exact-ids", paramLabel = "<n>", defaultValue = "20000",
            description = "Rows of the table checked exactly across the cluster changes. Default: ${DEFAULT-VALUE}.")
    int exactIds;

    @Option(names = "--dir", paramLabel = "<dir>",
            description = "Where ZooKeeper and the servers keep their files. Default: a temporary directory, removed "
                    + "after.")
    Path dir;

    @Override
    public Integer call() {
        // ZooKeeper's and Curator's SLF4J finds no binding (nothing is logged through it): say nothing of it.
        if (System.getProperty("slf4j.internal.verbosity") == null) {
            System.setProperty("slf4j.internal.verbosity", "ERROR");
        }
        PsDemo.Settings load = PsDemo.Settings.defaults().withTransports(transports).withTimes(warmupMillis, phaseMillis)
                .withSettle(settleMillis)
                .withIdSpace(ids).withServers(servers);
        return ClusterDemo.run(new ClusterDemo.Settings(load, servers, exactIds, dir), spec.commandLine().getOut(),
                spec.commandLine().getErr());
    }
}
