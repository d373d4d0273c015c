package dev.ferry.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import dev.ferry.bench.ps.PsDemo;
import dev.ferry.cluster.ClusterAdmin;
import dev.ferry.cluster.ClusterLauncher;
import dev.ferry.ps.net.PsClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * {@code bin/ferry demo} on the cluster path. For each transport: an embedded ZooKeeper and
 * server processes that join it (children of this process, stopped by PID at the end, on failure
 * and on Ctrl-C), a client that connects through the cluster's address and runs the inference
 * fetch and the training push workloads of {@link PsDemo}. On the first transport the cluster
 * then changes while an exact training workload runs ({@link DemoRebalance}): a server joins, one
 * leaves, every generation and move is printed, and every row is checked against the exact sum
 * of the acknowledged pushes. The table and the check's verdict go to the output at the end.
 */
final class ClusterDemo {

    /**
     * What the demo runs.
     *
     * @param load     the fetch and push workloads, and the transports ({@code label=provider});
     *                 the cluster changes on the first
     * @param servers  server processes each cluster starts with
     * @param exactIds rows of the exactly checked table during the changes
     * @param dir      where ZooKeeper and the servers keep their files; null for a temporary
     *                 directory, removed at the end
     */
    record Settings(PsDemo.Settings load, int servers, int exactIds, Path dir) {

        Settings {
            if (servers < 2) {
                throw new IllegalArgumentException("--servers must be >= 2 (one of them leaves): " + servers);
            }
            if (exactIds < 64) {
                throw new IllegalArgumentException("--exact-ids must be >= 64: " + exactIds);
            }
            if (load.transports().isEmpty()) {
                throw new IllegalArgumentException("no transport to run");
            }
        }
    }

    /** The client's retries: about 45 s of backoff in all, doubling from 1 ms to 500 ms. */
    static final int RETRY_ATTEMPTS = 100;
    static final long RETRY_BACKOFF_MILLIS = 500;

    private ClusterDemo() {
    }

    /**
     * Runs the demo and prints its table; returns 0, or 1 if anything failed (each failure
     * reported with its reason on {@code err}; no server process is left either way).
     */
    static int run(Settings settings, PrintWriter out, PrintWriter err) {
        long started = System.nanoTime();
        List<PsDemo.Row> rows = new ArrayList<>();
        DemoRebalance.Result changes = null;
        List<String> failures = new ArrayList<>();
        Path base = null;
        Thread removeOnExit = null;
        try {
            base = settings.dir() != null ? settings.dir() : Files.createTempDirectory("ferry-demo");
            if (settings.dir() == null) {
                // Ctrl-C skips the finally below: the temporary directory goes on the way out too.
                Path temporary = base;
                removeOnExit = new Thread(() -> deleteTree(temporary, err), "ferry-demo-cleanup");
                Runtime.getRuntime().addShutdownHook(removeOnExit);
            }
            // The cluster changes on the first transport whose cluster starts; a failed transport
            // is reported and the others still run.
            boolean[] changesTried = new boolean[1];
            for (String entry : settings.load().transports()) {
                String label = entry.contains("=") ? entry.substring(0, entry.indexOf('=')) : entry;
                String provider = entry.contains("=") ? entry.substring(entry.indexOf('=') + 1) : entry;
                int before = rows.size();
                try {
                    DemoRebalance.Result r = runTransport(settings, base.resolve(label), label, provider,
                            changesTried, rows, err);
                    if (r != null) {
                        changes = r;
                    }
                } catch (Exception e) {
                    String reason = reason(e);
                    failures.add(label + ": " + reason);
                    err.printf(Locale.ROOT, "ferry demo: %s failed: %s%n", label, reason);
                    if (rows.size() == before) {
                        rows.add(new PsDemo.Row(label, "fetch", 0, 0, 1, 0, 0, 0, reason));
                        rows.add(new PsDemo.Row(label, "push", 0, 0, 1, 0, 0, 0, reason));
                    }
                }
            }
        } catch (Exception e) {
            failures.add(reason(e));
        } finally {
            if (base != null && settings.dir() == null) {
                deleteTree(base, err);
            }
            if (removeOnExit != null) {
                try {
                    Runtime.getRuntime().removeShutdownHook(removeOnExit);
                } catch (IllegalStateException exiting) {
                    // already on the way out: the hook runs
                }
            }
        }
        err.printf(Locale.ROOT, "%nferry demo: %s in %.1f s%n", failures.isEmpty() ? "done" : "failed",
                (System.nanoTime() - started) / 1e9);
        if (!rows.isEmpty()) {
            PsDemo.print(settings.load().withServers(settings.servers()), rows, out);
        }
        if (changes != null) {
            out.print(changes.summary());
        }
        out.flush();
        for (String failure : failures) {
            err.println("ferry demo: failed: " + failure);
        }
        err.flush();
        return failures.isEmpty() ? 0 : 1;
    }

    /**
     * One cluster on one transport; runs the changes too unless {@code changesTried[0]} (then
     * set), and returns what they showed, or null.
     */
    private static DemoRebalance.Result runTransport(Settings settings, Path dir, String label, String provider,
            boolean[] changesTried, List<PsDemo.Row> rows, PrintWriter err) throws Exception {
        err.printf(Locale.ROOT, "ferry demo: %s: starting ZooKeeper (embedded) and %d server processes on %s...%n",
                label, settings.servers(), provider);
        err.flush();
        ByteArrayOutputStream startLog = new ByteArrayOutputStream();
        // Sessions of 10 s: nobody crashes here, and on a loaded machine 4 s let healthy servers expire.
        try (ClusterLauncher cluster = ClusterLauncher.start(dir, "demo", settings.servers(), provider, 10_000,
                new PrintStream(startLog, true, StandardCharsets.UTF_8), serverJvmOptions(dir))) {
            for (String line : startLog.toString(StandardCharsets.UTF_8).split("\n")) {
                err.println("ferry demo: " + label + ": " + line);
            }
            try (ClusterAdmin admin = ClusterAdmin.connect(cluster.config())) {
                String address = admin.status().clientAddress();
                TransportConfig transport = TransportConfig.defaults(provider).withConnectTimeoutMillis(10_000);
                RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withDefaultDeadlineMillis(10_000);
                try (PsClient client = PsClient.connect(rpc, transport, address)) {
                    // Patient on a loaded machine: a server may take seconds to install a new table.
                    client.retryPolicy(RETRY_ATTEMPTS, RETRY_BACKOFF_MILLIS);
                    err.printf(Locale.ROOT, "ferry demo: %s: client connected through %s: generation %d, %d servers%n",
                            label, address, client.routingTable().generation(), client.routingTable().serverCount());
                    err.flush();
                    rows.addAll(PsDemo.measure(settings.load().withServers(settings.servers()), client, label, err));
                    if (changesTried[0]) {
                        return null;
                    }
                    changesTried[0] = true;
                    return DemoRebalance.run(cluster, admin, client, label, settings.exactIds(), err);
                }
            }
        }
    }

    /**
     * The servers' JVM options: their log says each move at INFO, which would bury the demo's
     * lines (the demo prints the moves itself); warnings and errors still show, on one line each.
     */
    private static List<String> serverJvmOptions(Path dir) throws java.io.IOException {
        Files.createDirectories(dir);
        Path logging = dir.resolve("logging.properties");
        Files.writeString(logging, """
                handlers=java.util.logging.ConsoleHandler
                .level=WARNING
                java.util.logging.ConsoleHandler.level=WARNING
                java.util.logging.SimpleFormatter.format=%4$s: %5$s%6$s%n
                """);
        return List.of("-Xmx512m", "-Djava.util.logging.config.file=" + logging.toAbsolutePath(),
                "-Dslf4j.internal.verbosity=ERROR");
    }

    /** What a person should read of a failure: its messages down the causes, on one line. */
    static String reason(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null && b.length() < 400; t = t.getCause()) {
            String m = t.getMessage() == null ? t.getClass().getSimpleName() : t.getMessage().replace('\n', ' ');
            if (b.indexOf(m) < 0) {
                b.append(b.isEmpty() ? "" : ": ").append(m);
            }
        }
        return b.toString();
    }

    private static void deleteTree(Path root, PrintWriter err) {
        try (var walk = Files.walk(root)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException e) {
            err.println("ferry demo: could not remove " + root + ": " + e.getMessage());
        }
    }
}
