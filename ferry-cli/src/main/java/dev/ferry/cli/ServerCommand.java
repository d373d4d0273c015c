package dev.ferry.cli;

import dev.ferry.ps.net.PsServerMain;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code ferry server}: one parameter-server process. It prints {@code LISTENING <address>} on
 * standard output once clients can connect, and stops cleanly on SIGTERM.
 */
@Command(name = "server",
        mixinStandardHelpOptions = true,
        description = {"Runs one parameter server: prints LISTENING <address> on stdout once it listens, "
                + "serves pulls and pushes until SIGTERM.",
                "The RPC secret comes from FERRY_RPC_SECRET or FERRY_RPC_SECRET_FILE (or --no-auth, one host only)."},
        footer = {"", "Examples:",
                "  FERRY_RPC_SECRET=... ferry server --port 7001 --transport shm --checkpoint-dir /var/lib/ferry/ps0",
                "  ferry server --transport netty --index 1 --servers 2 --no-auth",
                "  ferry server --serving --checkpoint-dir /var/lib/ferry/ps0 --no-auth",
                "  ferry server --cluster zk://zk1:2181,zk2:2181,zk3:2181/prod --id ps-7 --transport tcp",
                "  ferry server --cluster zk://zk1:2181/serving --id sv-1 --serving --follow zk://zk1:2181/prod"})
public final class ServerCommand implements Callable<Integer> {

    @Spec
    private CommandSpec spec;

    @Option(names = "--port", paramLabel = "<port>", defaultValue = "0",
            description = "Port of the transport's listener (bootstrap port on libfabric). Default: a free one.")
    private int port;

    @Option(names = "--bind-host", paramLabel = "<host>", defaultValue = "127.0.0.1",
            description = "Address to listen on. On shm it also names the shared-memory region: "
                    + "a second server process on one host needs another loopback address (127.0.0.2, ...). "
                    + "Default: ${DEFAULT-VALUE}.")
    private String bindHost;

    @Option(names = "--transport", paramLabel = "<transport>", defaultValue = "shm",
            description = "shm or tcp (libfabric), or netty (kernel TCP). Default: ${DEFAULT-VALUE}.")
    private String transport;

    @Option(names = "--checkpoint-dir", paramLabel = "<dir>",
            description = "Restore from the newest checkpoint here at start, and write checkpoints here.")
    private Path checkpointDir;

    @Option(names = "--serving",
            description = "Read-only: load the newest checkpoint of --checkpoint-dir and reject pushes. "
                    + "With --cluster and --follow: a serving member fed by a training cluster's live export.")
    private boolean serving;

    @Option(names = "--follow", paramLabel = "<zk://host:port/name>",
            description = "With --cluster and --serving: the training cluster to follow (zk://host:port/name, "
                    + "or ferry://host:port,...); every --export-interval this member asks each training server "
                    + "for the rows of its slots changed since it last asked.")
    private String follow;

    @Option(names = "--export-interval", paramLabel = "<ms>", defaultValue = "10000",
            description = "How often a --follow member asks for changed rows. Default: ${DEFAULT-VALUE}.")
    private long exportInterval;

    @Option(names = "--index", paramLabel = "<i>", defaultValue = "0",
            description = "This server's index in the cluster. Default: ${DEFAULT-VALUE}.")
    private int index;

    @Option(names = "--servers", paramLabel = "<n>", defaultValue = "1",
            description = "Servers in the cluster. Default: ${DEFAULT-VALUE}.")
    private int servers;

    @Option(names = "--no-auth", description = "No RPC authentication: for a demo on one host only.")
    private boolean noAuth;

    @Option(names = "--metrics-port", paramLabel = "<port>",
            description = "Serve Prometheus metrics on http://<metrics-host>:<port>/metrics and readiness on /healthz "
                    + "(200 once the tables are restored and the listener is up, 503 before). Default: off.")
    private Integer metricsPort;

    @Option(names = "--metrics-host", paramLabel = "<host>", defaultValue = "127.0.0.1",
            description = "Address the metrics endpoint listens on (0.0.0.0 for a remote Prometheus). "
                    + "Default: ${DEFAULT-VALUE}.")
    private String metricsHost;

    @Option(names = {"--cluster", "--zookeeper"}, paramLabel = "<zk://host:port/name>",
            description = "Join a cluster run by a controller on ZooKeeper (zk://host:port[,host:port...]/name) "
                    + "instead of a fixed one: --index and --servers are then ignored.")
    private String cluster;

    @Option(names = "--id", paramLabel = "<id>",
            description = "The member id in the --cluster, stable across restarts. Default: the host name and port.")
    private String id;

    @Option(names = "--session-timeout", paramLabel = "<ms>", defaultValue = "4000",
            description = "ZooKeeper session timeout of a --cluster member: how long a dead server goes unnoticed. "
                    + "Default: ${DEFAULT-VALUE}.")
    private int sessionTimeout;

    @Option(names = "--exit-on-stdin-eof", hidden = true,
            description = "Exit when standard input closes (a child of a launcher).")
    private boolean exitOnStdinEof;

    @Override
    public Integer call() {
        dev.ferry.cluster.ClusterServerMain.Options member = null;
        dev.ferry.cluster.ExportOptions export = dev.ferry.cluster.ExportOptions.NONE;
        if (follow != null && cluster == null) {
            throw new ParameterException(spec.commandLine(), "--follow needs --cluster (the serving cluster's own "
                    + "zk://host:port/name) and --serving");
        }
        if (cluster != null) {
            try {
                String memberId = id != null ? id : java.net.InetAddress.getLocalHost().getHostName() + "-" + port;
                member = new dev.ferry.cluster.ClusterServerMain.Options(dev.ferry.cluster.ClusterConfig.parse(cluster)
                        .withSessionTimeoutMillis(sessionTimeout), memberId, port, bindHost, transport, checkpointDir,
                        exitOnStdinEof, noAuth);
                if (serving || follow != null) {
                    export = new dev.ferry.cluster.ExportOptions(serving, follow, exportInterval);
                }
            } catch (IllegalArgumentException | java.io.IOException e) {
                throw new ParameterException(spec.commandLine(), e.getMessage(), e);
            }
        }
        PsServerMain.Options options = null;
        if (member == null) {
            try {
                options = new PsServerMain.Options(port, bindHost, transport, checkpointDir, serving, index, servers,
                        exitOnStdinEof, noAuth);
            } catch (IllegalArgumentException e) {
                throw new ParameterException(spec.commandLine(), e.getMessage(), e);
            }
        }
        if (metricsPort == null) {
            return member != null ? dev.ferry.cluster.ClusterServerMain.serve(member, export, System.out, System.err,
                    new PsServerMain.Listener() {
                    }) : PsServerMain.serve(options, System.out, System.err);
        }
        MetricsEndpoint endpoint;
        try {
            endpoint = MetricsEndpoint.start(metricsHost, metricsPort);
        } catch (RuntimeException e) {
            System.err.println("ferry server: " + e.getMessage());
            return 1;
        }
        System.err.println("ferry server: metrics on http://" + endpoint.address() + "/metrics");
        try {
            return member != null ? dev.ferry.cluster.ClusterServerMain.serve(member, export, System.out, System.err,
                    endpoint)
                    : PsServerMain.serve(options, System.out, System.err, endpoint);
        } finally {
            endpoint.close();
        }
    }

    /** Runs {@code ferry server} alone (until the launcher registers it). */
    public static void main(String[] args) {
        System.exit(new CommandLine(new ServerCommand()).execute(args));
    }
}
