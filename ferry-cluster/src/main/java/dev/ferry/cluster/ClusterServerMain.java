package dev.ferry.cluster;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.net.DeltaFollower;
import dev.ferry.ps.net.ExportService;
import dev.ferry.ps.net.PsServer;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * One parameter-server process in a cluster run by a controller on ZooKeeper: listens, joins
 * ({@link ClusterMember}), prints {@code LISTENING <address>} and {@code JOINED <id>}, and serves
 * until SIGTERM (leaving the cluster at once) or until it was asked to leave cleanly
 * ({@code bin/ferry cluster remove}) and owns nothing any more (it prints {@code DRAINED} and
 * exits). {@code bin/ferry server --cluster} runs the same code.
 *
 * <pre>
 * ClusterServerMain --cluster zk://host:port/name --id id [--port p] [--bind-host h]
 *                   [--transport shm|tcp|netty] [--checkpoint-dir d] [--session-timeout ms]
 *                   [--replicas r] [--min-in-sync m] [--replication-timeout ms] [--cut-off-grace ms]
 *                   [--exit-on-stdin-eof] [--no-auth]
 *                   [--serving --follow zk://host:port/training|ferry://host:port,... [--export-interval ms]]
 * </pre>
 * The RPC secret comes from {@code FERRY_RPC_SECRET} or {@code FERRY_RPC_SECRET_FILE} unless
 * {@code --no-auth} (one host only).
 */
public final class ClusterServerMain {

    /** The line printed once the member node is registered, followed by the member id. */
    public static final String JOINED = "JOINED";
    /** The line printed before a drained server exits. */
    public static final String DRAINED = "DRAINED";

    private ClusterServerMain() {
    }

    /**
     * What to run.
     *
     * @param cluster        the cluster's ZooKeeper address and name
     * @param id             the member id (stable across restarts)
     * @param port           the transport's port; 0 picks a free one
     * @param bindHost       where it listens (on shm also the region's name: one per process)
     * @param transport      shm, tcp or netty
     * @param checkpointDir  the cluster's checkpoint root: this member writes into
 *                       {@code <dir>/<id>} and restores the groups of a dead member from
 *                       {@code <dir>/<its id>}; null for none (they restart empty)
     * @param exitOnStdinEof exit when standard input closes (a child of a launcher)
     * @param noAuth         no RPC authentication
     */
    public record Options(ClusterConfig cluster, String id, int port, String bindHost, String transport,
            Path checkpointDir, boolean exitOnStdinEof, boolean noAuth) {

        /** The command-line arguments that give these options. */
        public List<String> toArgs() {
            List<String> args = new ArrayList<>(List.of("--cluster", cluster.uri(), "--id", id, "--port",
                    Integer.toString(port), "--bind-host", bindHost, "--transport", transport, "--session-timeout",
                    Integer.toString(cluster.sessionTimeoutMillis()), "--replicas",
                    Integer.toString(cluster.replicationFactor()), "--min-in-sync", Integer.toString(cluster.minInSync()),
                    "--replication-timeout", Integer.toString(cluster.replicationTimeoutMillis()), "--cut-off-grace",
                    Integer.toString(cluster.cutOffGraceMillis())));
            if (checkpointDir != null) {
                args.add("--checkpoint-dir");
                args.add(checkpointDir.toString());
            }
            if (exitOnStdinEof) {
                args.add("--exit-on-stdin-eof");
            }
            if (noAuth) {
                args.add("--no-auth");
            }
            return args;
        }

        /** Parses the arguments. */
        public static Options parse(String[] args) {
            String cluster = null;
            String id = null;
            int port = 0;
            String bindHost = "127.0.0.1";
            String transport = "shm";
            Path dir = null;
            int session = -1;
            int replicas = -1;
            int minInSync = -1;
            int replicationTimeout = -1;
            int cutOffGrace = -1;
            boolean eof = false;
            boolean noAuth = false;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--cluster" -> cluster = value(args, ++i, a);
                    case "--id" -> id = value(args, ++i, a);
                    case "--port" -> port = Integer.parseInt(value(args, ++i, a));
                    case "--bind-host" -> bindHost = value(args, ++i, a);
                    case "--transport" -> transport = value(args, ++i, a);
                    case "--checkpoint-dir" -> dir = Path.of(value(args, ++i, a));
                    case "--session-timeout" -> session = Integer.parseInt(value(args, ++i, a));
                    case "--replicas" -> replicas = Integer.parseInt(value(args, ++i, a));
                    case "--min-in-sync" -> minInSync = Integer.parseInt(value(args, ++i, a));
                    case "--replication-timeout" -> replicationTimeout = Integer.parseInt(value(args, ++i, a));
                    case "--cut-off-grace" -> cutOffGrace = Integer.parseInt(value(args, ++i, a));
                    case "--exit-on-stdin-eof" -> eof = true;
                    case "--no-auth" -> noAuth = true;
                    default -> throw new IllegalArgumentException("unknown option " + a);
                }
            }
            if (cluster == null || id == null) {
                throw new IllegalArgumentException("--cluster zk://host:port/name and --id are required");
            }
            ClusterConfig config = ClusterConfig.parse(cluster);
            if (session > 0) {
                config = config.withSessionTimeoutMillis(session);
            }
            if (replicas > 0 || minInSync > 0) {
                config = config.withReplication(replicas > 0 ? replicas : config.replicationFactor(),
                        minInSync > 0 ? minInSync : Math.min(config.minInSync(), replicas > 0 ? replicas : 8));
            }
            if (replicationTimeout > 0) {
                config = config.withReplicationTimeoutMillis(replicationTimeout);
            }
            if (cutOffGrace >= 0) {
                config = config.withCutOffGraceMillis(cutOffGrace);
            }
            return new Options(config, id, port, bindHost, transport, dir, eof, noAuth);
        }

        private static String value(String[] args, int i, String option) {
            if (i >= args.length) {
                throw new IllegalArgumentException(option + " needs a value");
            }
            return args[i];
        }
    }

    public static void main(String[] args) {
        List<String> rest = new ArrayList<>();
        ExportOptions export;
        try {
            export = ExportOptions.extract(args, rest);
        } catch (IllegalArgumentException e) {
            System.err.println("ferry server: " + e.getMessage());
            System.exit(2);
            return;
        }
        PsServerMain.run(rest.toArray(String[]::new), Options::parse,
                options -> serve(options, export, System.out, System.err, new PsServerMain.Listener() {
                }));
    }

    /** Runs a member server until SIGTERM, end of input (with {@code exitOnStdinEof}) or drained. */
    public static int serve(Options options, PrintStream out, PrintStream err) {
        return serve(options, out, err, new PsServerMain.Listener() {
        });
    }

    /**
     * {@link #serve(Options, PrintStream, PrintStream)}, telling {@code listener} of each step: the
     * server is made, it serves once it has joined the cluster, it stops.
     */
    public static int serve(Options options, PrintStream out, PrintStream err, PsServerMain.Listener listener) {
        return serve(options, ExportOptions.NONE, out, err, listener);
    }

    /**
     * {@link #serve(Options, PrintStream, PrintStream, PsServerMain.Listener)} with the live
     * export's options: a training member answers followers ({@link ExportService}); with
     * {@link ExportOptions#serving()} the member is a read-only serving server that follows the
     * training cluster {@link ExportOptions#follow()} ({@link DeltaFollower}).
     */
    public static int serve(Options options, ExportOptions export, PrintStream out, PrintStream err,
            PsServerMain.Listener listener) {
        ParameterServer ps = export.serving() ? ParameterServer.follower(PsConfig.defaults())
                : ParameterServer.create(PsConfig.defaults());
        RpcConfig rpc = RpcConfig.defaults().withHandlerThreads(Math.max(4, Runtime.getRuntime().availableProcessors()));
        if (options.noAuth()) {
            rpc = rpc.withoutAuthentication();
        }
        Path own = options.checkpointDir() == null ? null : options.checkpointDir().resolve(options.id());
        PsServer server = PsServer.openMember(ps, options.id(), own, rpc, false);
        listener.opened(server);
        if (!export.serving()) {
            listener.exporting(ExportService.attach(server));
        }
        String address;
        TransportConfig transport = TransportConfig.defaults(options.transport()).withBindHost(options.bindHost());
        try {
            address = server.listen(transport.withBindPort(options.port()));
        } catch (RuntimeException e) {
            err.println("ferry server: cannot listen on " + options.transport() + ": " + e.getMessage());
            out.println("ERROR cannot listen on " + options.transport() + ": " + e.getMessage()); // for a launcher
            out.flush();
            server.close();
            ps.close();
            return 1;
        }
        out.println(PsServerMain.LISTENING + " " + address);
        out.flush();
        ClusterMember member;
        try {
            member = ClusterMember.join(options.cluster(), new MemberInfo(options.id(), System.nanoTime(), host(),
                    Map.of(options.transport(), address), Runtime.getRuntime().maxMemory()), server,
                    options.checkpointDir());
        } catch (RuntimeException e) {
            err.println("ferry server: " + e.getMessage());
            out.println("ERROR cannot join " + options.cluster().uri() + ": " + e.getMessage()); // for a launcher
            out.flush();
            server.close();
            ps.close();
            return 1;
        }
        err.printf("ferry server: member %s of %s on %s at %s%n", options.id(), options.cluster().uri(),
                options.transport(), address);
        DeltaFollower follower = null;
        FollowedCluster followed = null;
        if (export.serving()) {
            followed = FollowedCluster.of(export.follow(), options.transport());
            follower = DeltaFollower.start(server, followed, rpc, transport, export.intervalMillis());
            listener.following(follower);
            err.printf("ferry server: serving, following %s every %d ms%n", export.follow(), export.intervalMillis());
        }
        listener.listening(server, address);
        out.println(JOINED + " " + options.id());
        out.flush();
        CountDownLatch stopped = new CountDownLatch(1);
        DeltaFollower stopFollower = follower;
        FollowedCluster stopFollowed = followed;
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            listener.stopping();
            if (stopFollower != null) {
                stopFollower.close();
                stopFollowed.close();
            }
            member.close();
            server.close();
            ps.close();
            stopped.countDown();
        }, "ferry-server-stop"));
        // A clean leave: asked through the cluster (a drain node), the member drains, then exits.
        Thread drainWatch = new Thread(() -> {
            while (true) {
                try {
                    if (member.drainRequested()) {
                        member.drain().get();
                        out.println(DRAINED + " " + options.id());
                        out.flush();
                        System.exit(0);
                    }
                    TimeUnit.MILLISECONDS.sleep(200);
                } catch (InterruptedException e) {
                    return;
                } catch (Exception e) {
                    err.println("ferry server: drain failed: " + e);
                }
            }
        }, "ferry-server-drain");
        drainWatch.setDaemon(true);
        drainWatch.start();
        if (options.exitOnStdinEof() && follower != null) {
            ExportStatus.answerOnStdin(follower, out);
        } else if (options.exitOnStdinEof()) {
            PsServerMain.exitOnStdinEof();
        }
        PsServerMain.await(stopped);
        return 0;
    }

    private static String host() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "localhost";
        }
    }
}
