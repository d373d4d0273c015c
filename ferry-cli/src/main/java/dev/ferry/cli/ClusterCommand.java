package dev.ferry.cli;

import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;

import dev.ferry.cluster.ClusterAdmin;
import dev.ferry.cluster.ClusterConfig;
import dev.ferry.cluster.ClusterLauncher;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code ferry cluster}: a parameter-server cluster run by a controller on ZooKeeper. On one
 * host {@code start} embeds ZooKeeper and starts the servers; {@code status}, {@code add} and
 * {@code remove} act on it (or on any cluster, given its {@code zk://} address).
 */
@Command(name = "cluster",
        mixinStandardHelpOptions = true,
        description = "A parameter-server cluster on ZooKeeper: members, a controller, slot groups that move.",
        subcommands = {ClusterCommand.Start.class, ClusterCommand.Status.class, ClusterCommand.Add.class,
                ClusterCommand.Remove.class},
        footer = {"", "Examples (one host):",
                "  ferry cluster start --servers 3 &",
                "  ferry cluster status",
                "  ferry cluster add",
                "  ferry cluster remove --id s1",
                "Many hosts: ferry server --cluster zk://zk1:2181,zk2:2181,zk3:2181/prod --id ... on each host,",
                "  then ferry cluster status --cluster zk://zk1:2181,zk2:2181,zk3:2181/prod (docs/cluster.md)."})
public final class ClusterCommand implements Runnable {

    @Spec
    private CommandSpec spec;

    @Override
    public void run() {
        throw new ParameterException(spec.commandLine(), "missing command: start, status, add or remove");
    }

    /** The cluster directory or address shared by the subcommands. */
    static final class Where {
        @Option(names = "--dir", paramLabel = "<dir>", defaultValue = "target/ferry-cluster",
                description = "The directory of a cluster started here. Default: ${DEFAULT-VALUE}.")
        Path dir;

        @Option(names = "--cluster", paramLabel = "<zk://host:port/name>",
                description = "Any cluster, by its ZooKeeper address (instead of --dir).")
        String cluster;

        ClusterConfig config() throws Exception {
            return cluster != null ? ClusterConfig.parse(cluster) : ClusterLauncher.recorded(dir);
        }
    }

    @Command(name = "start", mixinStandardHelpOptions = true,
            description = "Starts ZooKeeper (embedded in this process) and N servers as child processes; runs until "
                    + "interrupted, then stops them all.")
    static final class Start implements Callable<Integer> {
        @Option(names = "--servers", paramLabel = "<n>", defaultValue = "3", description = "Default: ${DEFAULT-VALUE}.")
        int servers;

        @Option(names = "--dir", paramLabel = "<dir>", defaultValue = "target/ferry-cluster",
                description = "Where ZooKeeper's data, logs and the cluster's address go. Default: ${DEFAULT-VALUE}.")
        Path dir;

        @Option(names = "--name", paramLabel = "<name>", defaultValue = "local", description = "Default: ${DEFAULT-VALUE}.")
        String name;

        @Option(names = "--transport", paramLabel = "<transport>", defaultValue = "shm",
                description = "shm or tcp (libfabric), or netty. Default: ${DEFAULT-VALUE}.")
        String transport;

        @Option(names = "--session-timeout", paramLabel = "<ms>", defaultValue = "4000",
                description = "ZooKeeper session timeout of the servers. Default: ${DEFAULT-VALUE}.")
        int sessionTimeout;

        @Override
        public Integer call() throws Exception {
            ClusterLauncher launcher = ClusterLauncher.start(dir, name, servers, transport, sessionTimeout, System.out);
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                launcher.close();
                System.out.println("cluster stopped");
                stopped.countDown();
            }, "ferry-cluster-stop"));
            System.out.println("running; clients connect with the address above. Ctrl-C stops the cluster.");
            System.out.flush();
            stopped.await();
            return 0;
        }
    }

    @Command(name = "status", mixinStandardHelpOptions = true,
            description = "Members, generation, slots per server, moves in flight.")
    static final class Status implements Callable<Integer> {
        @picocli.CommandLine.Mixin
        Where where;

        @Override
        public Integer call() throws Exception {
            try (ClusterAdmin admin = ClusterAdmin.connect(where.config())) {
                System.out.print(ClusterAdmin.format(admin.status()));
            }
            return 0;
        }
    }

    @Command(name = "add", mixinStandardHelpOptions = true,
            description = "Starts one more server in a cluster started here and waits until slots moved to it.")
    static final class Add implements Callable<Integer> {
        @Option(names = "--dir", paramLabel = "<dir>", defaultValue = "target/ferry-cluster",
                description = "Default: ${DEFAULT-VALUE}.")
        Path dir;

        @Override
        public Integer call() throws Exception {
            String id = ClusterLauncher.add(dir, System.out);
            System.out.println("added " + id);
            return 0;
        }
    }

    @Command(name = "remove", mixinStandardHelpOptions = true,
            description = "Asks a server to leave cleanly: its slots move to the others while serving, then it exits.")
    static final class Remove implements Callable<Integer> {
        @picocli.CommandLine.Mixin
        Where where;

        @Option(names = "--id", paramLabel = "<id>", required = true, description = "The member to remove.")
        String id;

        @Override
        public Integer call() throws Exception {
            ClusterLauncher.remove(where.config(), where.cluster == null ? where.dir : null, id, System.out);
            return 0;
        }
    }
}
