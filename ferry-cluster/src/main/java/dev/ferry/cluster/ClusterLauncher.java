package dev.ferry.cluster;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsServerMain;

/**
 * A cluster on one host ({@code bin/ferry cluster start|add|remove}): the launcher process runs
 * an {@link EmbeddedZooKeeper} and the servers as child processes, and records in its directory
 * what later commands need ({@code cluster.properties}: the ZooKeeper address and transport;
 * {@code <id>.pid} and {@code <id>.log} for servers added later; {@code checkpoints/<id>}, where
 * {@code PsClient.checkpoint()} writes and from where a dead server's groups are restored). Servers register, elect a
 * controller and move slots exactly as on many hosts.
 */
public final class ClusterLauncher implements AutoCloseable {

    private static final String PROPERTIES = "cluster.properties";

    private final Path directory;
    private final ClusterConfig config;
    private final String transport;
    private final EmbeddedZooKeeper zk;
    private final List<String> jvmOptions;
    private final List<ChildJvm> children = new java.util.concurrent.CopyOnWriteArrayList<>();

    private ClusterLauncher(Path directory, ClusterConfig config, String transport, EmbeddedZooKeeper zk,
            List<String> jvmOptions) {
        this.directory = directory;
        this.jvmOptions = List.copyOf(jvmOptions);
        this.config = config;
        this.transport = transport;
        this.zk = zk;
    }

    /**
     * Starts ZooKeeper and {@code servers} servers ({@code s0}, {@code s1}, ...), and waits until
     * the controller spread the groups over them.
     */
    public static ClusterLauncher start(Path directory, String name, int servers, String transport, int sessionMillis,
            PrintStream out) throws Exception {
        return start(directory, name, servers, transport, sessionMillis, out, List.of("-Xmx512m"));
    }

    /**
     * {@link #start(Path, String, int, String, int, PrintStream)} with {@code jvmOptions} for the
     * server processes (also those {@link #addServer} starts), before {@code FERRY_SERVER_JAVA_OPTS}.
     */
    public static ClusterLauncher start(Path directory, String name, int servers, String transport, int sessionMillis,
            PrintStream out, List<String> jvmOptions) throws Exception {
        if (servers < 1) {
            throw new IllegalArgumentException("--servers must be >= 1: " + servers);
        }
        Files.createDirectories(directory);
        EmbeddedZooKeeper zk = EmbeddedZooKeeper.start(directory.resolve("zookeeper"), 0, Math.min(1_000,
                sessionMillis / 2));
        ClusterConfig config = ClusterConfig.of(zk.connectString(), name).withSessionTimeoutMillis(sessionMillis);
        ClusterLauncher launcher = new ClusterLauncher(directory, config, transport, zk, jvmOptions);
        try {
            Properties p = new Properties();
            p.setProperty("cluster", config.uri());
            p.setProperty("transport", transport);
            p.setProperty("session-timeout", Integer.toString(sessionMillis));
            try (var w = Files.newBufferedWriter(directory.resolve(PROPERTIES))) {
                p.store(w, "bin/ferry cluster start");
            }
            out.println("ZooKeeper (embedded) at " + zk.connectString() + "; cluster " + config.uri());
            for (int i = 0; i < servers; i++) {
                launcher.children.add(startChild(config, "s" + i, i, transport, directory.resolve("checkpoints"),
                        jvmOptions));
            }
            for (ChildJvm child : launcher.children) {
                child.expect(ClusterServerMain.JOINED, ChildJvm.startMillis(30_000));
            }
            try (ClusterAdmin admin = ClusterAdmin.connect(config)) {
                awaitBalanced(admin, servers, config.replicationFactor());
                out.print(ClusterAdmin.format(admin.status()));
            }
            return launcher;
        } catch (Exception e) {
            launcher.close();
            throw e;
        }
    }

    /** The cluster's configuration as recorded in {@code directory} by {@link #start}. */
    public static ClusterConfig recorded(Path directory) throws IOException {
        Properties p = properties(directory);
        return ClusterConfig.parse(p.getProperty("cluster"))
                .withSessionTimeoutMillis(Integer.parseInt(p.getProperty("session-timeout", "4000")));
    }

    /**
     * Starts one more server as a process of its own (it outlives this command: the launcher of
     * {@link #start} stops it when it stops), waits until the groups are spread over it too, and
     * returns its member id.
     */
    public static String add(Path directory, PrintStream out) throws Exception {
        ClusterConfig config = recorded(directory);
        String transport = properties(directory).getProperty("transport", "shm");
        try (ClusterAdmin admin = ClusterAdmin.connect(config)) {
            int n = 0;
            while (admin.status().members().containsKey("s" + n) || Files.exists(directory.resolve("s" + n + ".pid"))) {
                n++;
            }
            String id = "s" + n;
            ClusterServerMain.Options o = new ClusterServerMain.Options(config, id, 0, bindHost(n, transport), transport,
                    directory.resolve("checkpoints"), false, true);
            ProcessBuilder builder = new ProcessBuilder(ChildJvm.javaCommand(
                    ChildJvm.serverJvmOptions(List.of("-Xmx512m")), ClusterServerMain.class.getName(), o.toArgs()));
            builder.redirectErrorStream(true).redirectOutput(directory.resolve(id + ".log").toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
            Process process = builder.start();
            Files.writeString(directory.resolve(id + ".pid"), Long.toString(process.pid()));
            int members = admin.status().members().size() + 1;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (!admin.status().members().containsKey(id)) {
                if (!process.isAlive() || System.nanoTime() > deadline) {
                    throw new IllegalStateException("server " + id + " did not join; see " + directory.resolve(id + ".log"));
                }
                Thread.sleep(50);
            }
            awaitBalanced(admin, members, config.replicationFactor());
            out.print(ClusterAdmin.format(admin.status()));
            return id;
        }
    }

    /** Asks member {@code id} to leave cleanly and waits until it has (its groups moved, its process exited). */
    public static void remove(ClusterConfig config, Path directory, String id, PrintStream out) throws Exception {
        try (ClusterAdmin admin = ClusterAdmin.connect(config)) {
            int members = admin.status().members().size() - 1;
            long start = System.nanoTime();
            admin.remove(id);
            if (!admin.awaitGone(id, 120_000)) {
                throw new IllegalStateException("member " + id + " did not leave within 120 s");
            }
            admin.forget(id);
            if (directory != null) {
                Files.deleteIfExists(directory.resolve(id + ".pid"));
            }
            // Started here: the launcher's replication factor; any cluster: unknown, only the primaries.
            awaitBalanced(admin, members, directory != null ? config.replicationFactor() : 0);
            out.printf("%s left after %d ms%n", id, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
            out.print(ClusterAdmin.format(admin.status()));
        }
    }

    /**
     * Starts one more server as a child of this launcher (stopped with it, and when this process
     * ends), waits until the controller spread the groups over it too, and returns its member id.
     *
     * @throws IllegalStateException with the server's reason if it cannot start or join, or if
     *                               the groups are not spread within 120 s
     */
    public String addServer() throws Exception {
        try (ClusterAdmin admin = ClusterAdmin.connect(config)) {
            var members = admin.status().members();
            int n = 0;
            while (members.containsKey("s" + n) || hasChild("s" + n)) {
                n++;
            }
            String id = "s" + n;
            ChildJvm child = startChild(config, id, n, transport, directory.resolve("checkpoints"), jvmOptions);
            children.add(child);
            child.expect(ClusterServerMain.JOINED, ChildJvm.startMillis(30_000));
            awaitBalanced(admin, members.size() + 1, config.replicationFactor());
            return id;
        }
    }

    /**
     * Asks member {@code id} to leave cleanly and waits until its groups moved to the others,
     * the groups are spread evenly again, and (if this launcher started it) its process ended.
     *
     * @throws IllegalStateException if it did not leave within 120 s or its process did not end
     */
    public void removeServer(String id) throws Exception {
        remove(config, directory, id, new PrintStream(java.io.OutputStream.nullOutputStream()));
        for (ChildJvm child : children) {
            if (child.name().equals(id)) {
                if (!child.awaitExit(30_000)) {
                    throw new IllegalStateException("member " + id + " left but its process " + child.pid()
                            + " did not exit within 30 s");
                }
                child.close();
                children.remove(child);
            }
        }
    }

    /** The PIDs of the server processes this launcher started and that still run. */
    public List<Long> serverPids() {
        return children.stream().filter(ChildJvm::isAlive).map(ChildJvm::pid).toList();
    }

    private boolean hasChild(String id) {
        return children.stream().anyMatch(c -> c.name().equals(id));
    }

    /** The cluster's configuration. */
    public ClusterConfig config() {
        return config;
    }

    /** Stops the servers it started and those added later (by their recorded PIDs), then ZooKeeper. */
    @Override
    public void close() {
        // All at once: one by one, the survivors would take over the groups of each that stops.
        for (ChildJvm child : children) {
            child.terminate();
        }
        for (ChildJvm child : children) {
            child.close();
        }
        try (var files = Files.list(directory)) {
            for (Path pid : files.filter(f -> f.getFileName().toString().endsWith(".pid")).toList()) {
                ProcessHandle.of(Long.parseLong(Files.readString(pid).strip())).ifPresent(p -> {
                    p.destroy();
                    try {
                        p.onExit().get(5, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        p.destroyForcibly();
                    }
                });
                Files.deleteIfExists(pid);
            }
        } catch (IOException | RuntimeException e) {
            // best effort on the way out
        }
        zk.close();
    }

    private static ChildJvm startChild(ClusterConfig config, String id, int n, String transport, Path checkpoints,
            List<String> jvmOptions) {
        ClusterServerMain.Options o = new ClusterServerMain.Options(config, id, 0, bindHost(n, transport), transport,
                checkpoints, true, true);
        ChildJvm child = ChildJvm.start(ChildJvm.javaCommand(ChildJvm.serverJvmOptions(jvmOptions),
                ClusterServerMain.class.getName(), o.toArgs()), id);
        try {
            child.expect(PsServerMain.LISTENING, ChildJvm.startMillis(30_000));
        } catch (RuntimeException e) {
            child.close(); // not the launcher's yet: nobody else would stop it
            throw e;
        }
        return child;
    }

    /** On shm each process needs its own loopback address (it names the shared-memory region). */
    private static String bindHost(int n, String transport) {
        return transport.equals("shm") ? "127.0.0." + (10 + n) : "127.0.0.1";
    }

    /** Waits until {@link #settled}; {@code replicas} 0 if unknown (then only {@link #balanced}). */
    private static void awaitBalanced(ClusterAdmin admin, int members, int replicas) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (replicas > 0 ? !settled(admin.status(), members, replicas) : !balanced(admin.status(), members)) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the controller did not spread the groups over " + members
                        + " members within 120 s:\n" + ClusterAdmin.format(admin.status()));
            }
            Thread.sleep(50);
        }
    }

    /**
     * {@link #balanced} and every group has its {@code replicas - 1} backups (or one on each other
     * member, if fewer): no copy still to come, so that what runs next meets no move.
     */
    static boolean settled(ClusterAdmin.Status s, int n, int replicas) {
        if (!balanced(s, n)) {
            return false;
        }
        int backups = Math.min(replicas - 1, n - 1);
        for (int g = 0; g < dev.ferry.ps.net.RoutingTable.GROUPS; g++) {
            if (s.assignment().backupsOf(g).size() != backups) {
                return false;
            }
        }
        return true;
    }

    static boolean balanced(ClusterAdmin.Status s, int n) {
        Assignment a = s.assignment();
        if (a.move() != null || s.members().size() != n) {
            return false;
        }
        int lo = dev.ferry.ps.net.RoutingTable.GROUPS / n;
        for (String id : s.members().keySet()) {
            int g = a.groupCount(id);
            if (g < lo || g > lo + 1) {
                return false;
            }
        }
        // Replicated: every group has as many copies as the others (no copy still to come).
        for (int g = 1; g < dev.ferry.ps.net.RoutingTable.GROUPS; g++) {
            if (a.backupsOf(g).size() != a.backupsOf(0).size()) {
                return false;
            }
        }
        return true;
    }

    private static Properties properties(Path directory) throws IOException {
        Path file = directory.resolve(PROPERTIES);
        if (!Files.exists(file)) {
            throw new IllegalArgumentException("no cluster recorded in " + directory + " (run bin/ferry cluster start)");
        }
        Properties p = new Properties();
        try (var r = Files.newBufferedReader(file)) {
            p.load(r);
        }
        return p;
    }
}
