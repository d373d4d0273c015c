package dev.ferry.bench.ps;

import java.nio.file.Path;
import java.util.List;

import picocli.CommandLine.Option;

/**
 * Options both benchmarks share; a picocli mixin. Field initial values are the defaults, so an
 * instance made with {@code new} is the default run.
 */
public class BenchOptions {

    @Option(names = "--transports", split = ",", paramLabel = "<t>",
            description = "Transports to run in turn: direct (the floor: clients call the servers' parameter "
                    + "servers in their own process, no RPC), local (Ferry RPC over the in-JVM transport, one "
                    + "process), shm, tcp (Ferry RPC over libfabric), netty (Ferry RPC over kernel TCP, the baseline "
                    + "of the ratios), grpc (gRPC-java). Default: direct,local,shm,tcp,netty,grpc.")
    public List<String> transports = List.of("direct", "local", "shm", "tcp", "netty", "grpc");

    @Option(names = "--replicas", split = ",", paramLabel = "<r>",
            description = "Copies of every slot group, one run of each per transport, alternating (e.g. 1,2): the "
                    + "servers then run as cluster members with a fixed routing table and its replicas, installed "
                    + "by the driver (no controller, no ZooKeeper, which are off the data path): r = 1 members "
                    + "without backups, r = 2 each group backed up on the next server. Rows are labelled "
                    + "'<transport> r=<r>'. Ferry's shm, tcp and netty only. Default: none (a fixed cluster).")
    public List<Integer> replicas = List.of();

    @Option(names = "--servers", paramLabel = "<n>", description = "Server processes. Default: 2.")
    public int servers = 2;

    @Option(names = "--dimension", paramLabel = "<n>", description = "Floats per embedding row. Default: 64.")
    public int dimension = 64;

    @Option(names = "--ids", paramLabel = "<n>",
            description = "The id space [0, n); every id's row is created before the run. Default: 1000000.")
    public long ids = 1_000_000;

    @Option(names = "--zipf-alpha", paramLabel = "<a>", description = "Zipf exponent of --distribution zipf. "
            + "Default: 1.09.")
    public double zipfAlpha = 1.09;

    @Option(names = "--warmup", paramLabel = "<s>", description = "Unmeasured seconds before each transport's "
            + "measured interval (JIT, pools, connections). On 2 cores the JVMs of a run take long to compile their "
            + "hot paths, gRPC's (Netty, HTTP/2, protobuf) longest. Default: 25 for fetch, 15 for push.")
    public Double warmupSeconds;

    @Option(names = "--settle", paramLabel = "<share>",
            description = "Push: after --warmup, keep warming up until the JIT compilers take under this share of the "
                    + "run's CPU over 5 s (such as 0.05), at most 180 s more, so that the measured interval is the "
                    + "steady state rather than the JVMs' start-up (17 JVMs on two cores compile for minutes). "
                    + "Default: off.")
    public Double settle;

    @Option(names = "--duration", paramLabel = "<s>", description = "Measured seconds per transport. Default: 10.")
    public double durationSeconds = 10;

    @Option(names = "--server-threads", paramLabel = "<n>",
            description = "Request-handler threads per server (both RPC stacks). Default: 2.")
    public int serverThreads = 2;

    @Option(names = "--ps-transport", paramLabel = "<s>",
            description = "Settings of Ferry's transports (shm, tcp, netty): tuned, the parameter server's (PsTransport: "
                    + "eager threshold 256 KiB, 16 receive buffers per link), or default (TransportConfig.defaults: "
                    + "16 KiB, 64). Default: tuned.")
    public String psTransport = "tuned";

    @Option(names = "--pull-threads", paramLabel = "<s>",
            description = "Where Ferry's servers serve pulls: transport, on the transport's thread as they arrive "
                    + "(PsServer's inline pulls), or handler, on the --server-threads handler threads. Pushes run on "
                    + "handler threads either way; gRPC always uses its handler threads. Default: transport.")
    public String pullThreads = "transport";

    @Option(names = "--network", paramLabel = "<n>",
            description = "loopback, or netlab: the server in the receiver namespace and one worker process per "
                    + "sender namespace of the emulated leaf switch that sudo bin/netlab up built (docs/netlab.md); "
                    + "one server, transports tcp, netty, grpc (shm cannot cross namespaces). Results add the "
                    + "network's drops, TCP retransmissions and timeouts. Default: loopback.")
    public String network = "loopback";

    @Option(names = "--netlab-hosts", paramLabel = "<n>",
            description = "With --network netlab: sender namespaces to use, one worker process each, the worker "
                    + "threads spread over them. Default: one per worker thread, at most the lab's senders.")
    public int netlabHosts;

    @Option(names = "--pull-budget", paramLabel = "<bytes>",
            description = "With --network netlab and flow control on: the bytes of rendezvous reads Ferry's server "
                    + "may have in flight across all senders (TransportConfig.pullBudgetBytes). Default: from the lab, "
                    + "its bandwidth-delay product plus three quarters of the receiver's port buffer.")
    public long pullBudget = -1;

    @Option(names = "--progress-nice", paramLabel = "<n>",
            description = "Nice value (-20 to 19) of the transports' progress threads and Netty event loops in every "
                    + "benchmark process (the ferry.transport.progressNice property; gRPC's threads are not touched): "
                    + "below 0 they run first when they wake on busy cores. Below 0 needs root or CAP_SYS_NICE. "
                    + "Default: 0, as the JVM makes them.")
    public int progressNice;

    @Option(names = "--seed", paramLabel = "<n>", description = "Seed of the id streams. Default: 1.")
    public long seed = 1;

    @Option(names = "--report-dir", paramLabel = "<dir>",
            description = "Where reports/<date-time>/ goes (JSON, Markdown, PNG plots). Default: reports.")
    public Path reportDir = Path.of("reports");

    @Option(names = "--no-report", description = "Print the table and JSON lines only.")
    public boolean noReport;

    @Option(names = "--child-jvm-options", split = " ", paramLabel = "<opts>",
            description = "JVM options of the server and client processes. Default: -Xms256m -Xmx2g.")
    public List<String> childJvmOptions = List.of("-Xms256m", "-Xmx2g");

    /** The child processes' JVM options: {@code --child-jvm-options} and what the other options ask of the JVM. */
    public List<String> childJvm() {
        if (progressNice == 0) {
            return childJvmOptions;
        }
        List<String> all = new java.util.ArrayList<>(childJvmOptions);
        all.add("-D" + dev.ferry.transport.ProgressNice.PROPERTY + "=" + progressNice);
        return all;
    }

    @Option(names = "--metrics-port", paramLabel = "<port>",
            description = "Serve Prometheus metrics from every benchmark process: server i on port+i, client process p "
                    + "on port+servers+p (/metrics, /healthz on 127.0.0.1), scraped by the driver every second like a "
                    + "Prometheus would. Default: off.")
    public Integer metricsPort;

    @Option(names = "--metrics-compare", paramLabel = "<rounds>",
            description = "Run each transport with metrics off, then on (--metrics-port, default 9400), alternately, "
                    + "this many rounds, and print CPU per op on/off (the best round of each). Default: off.")
    public int metricsRounds;

    @Option(names = "--rounds", paramLabel = "<n>",
            description = "Run every transport in turn, this many times over (round 1: each transport, round 2: each "
                    + "again, ...); print each round's table, its ratios from that round, then each transport's best "
                    + "ratio over the rounds. Runs minutes apart drift more than the transports of one round differ: "
                    + "the best of 3 alternating rounds is how this project reports. Default: 1.")
    public int rounds = 1;

    /** The first metrics port, or 0 when off. */
    int metricsBase() {
        return metricsPort != null ? metricsPort : metricsRounds > 0 ? 9400 : 0;
    }

    /** The warm-up, or {@code byDefault} when none was given. */
    double warmup(double byDefault) {
        return warmupSeconds != null ? warmupSeconds : byDefault;
    }

    /** The replica counts to run, 0 standing for a fixed cluster (no --replicas). */
    List<Integer> replicaRuns() {
        return replicas.isEmpty() ? List.of(0) : replicas;
    }

    /** A result's label with its replica count (none for a fixed cluster). */
    static String withReplicas(String label, int replicas) {
        return replicas == 0 ? label : label + " r=" + replicas;
    }

    List<BenchTransport> transportList() {
        return transports.stream().map(BenchTransport::parse).toList();
    }

    void check() {
        if (servers < 1 || dimension < 1 || ids < 1 || (warmupSeconds != null && warmupSeconds < 0)
                || durationSeconds <= 0
                || serverThreads < 1) {
            throw new IllegalArgumentException("--servers, --dimension, --ids, --server-threads must be >= 1, "
                    + "--duration > 0, --warmup >= 0");
        }
        if (settle != null) {
            JitSettle.checkShare(settle);
        }
        transportList();
        for (int r : replicas) {
            if (r < 1 || r > 2 || r > servers) {
                throw new IllegalArgumentException("--replicas takes 1 or 2 (at most --servers): " + r);
            }
        }
        if (!replicas.isEmpty()) {
            for (BenchTransport t : transportList()) {
                if (!t.ferry() || t.inProcess() || netlab()) {
                    throw new IllegalArgumentException("--replicas runs cluster members over Ferry's shm, tcp or "
                            + "netty on loopback, not " + t.label() + (netlab() ? " on netlab" : ""));
                }
            }
        }
        if (metricsPort != null && (metricsPort < 1 || metricsPort > 65000) || metricsRounds < 0) {
            throw new IllegalArgumentException("--metrics-port must be in [1, 65000], --metrics-compare >= 0");
        }
        if (rounds < 1 || rounds > 1 && metricsRounds > 0) {
            throw new IllegalArgumentException("--rounds must be at least 1, and 1 with --metrics-compare (which has rounds of its own)");
        }
        if (!psTransport.equals("tuned") && !psTransport.equals("default")) {
            throw new IllegalArgumentException("--ps-transport is tuned or default: " + psTransport);
        }
        if (!network.equals("loopback") && !network.equals("netlab")) {
            throw new IllegalArgumentException("--network is loopback or netlab: " + network);
        }
        if (netlab()) {
            for (BenchTransport t : transportList()) {
                if (t == BenchTransport.SHM) {
                    throw new IllegalArgumentException("--network netlab: shm is shared memory on one host and "
                            + "cannot cross network namespaces; use tcp, netty or grpc");
                }
                if (t.inProcess()) {
                    throw new IllegalArgumentException("--network netlab: " + t.label() + " runs in one process, "
                            + "with no network; use tcp, netty or grpc");
                }
            }
        }
        if (progressNice < -20 || progressNice > 19) {
            throw new IllegalArgumentException("--progress-nice takes a nice value from -20 to 19: " + progressNice);
        }
        if (!pullThreads.equals("transport") && !pullThreads.equals("handler")) {
            throw new IllegalArgumentException("--pull-threads is transport or handler: " + pullThreads);
        }
    }

    boolean netlab() {
        return network.equals("netlab");
    }

    boolean psTuning() {
        return psTransport.equals("tuned");
    }

    boolean inlinePulls() {
        return pullThreads.equals("transport");
    }
}
