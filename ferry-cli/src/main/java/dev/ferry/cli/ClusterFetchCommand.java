package dev.ferry.cli;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.HdrHistogram.Histogram;

import dev.ferry.bench.ps.ZipfSampler;
import dev.ferry.cluster.ClusterAdmin;
import dev.ferry.cluster.ClusterLauncher;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code ferry bench fetch-move}: fetches from a cluster of server processes on ZooKeeper while
 * one server joins and slot groups move to it, with the latency before, during and after the
 * moves reported apart. Each fetch is timed into the histogram of the phase it started in: a
 * move is in flight while the assignment in ZooKeeper names one (polled every 10 ms). Nothing
 * pushes, so every row must keep the value its first pull gave it: each fetch is checked
 * against that, before, during and after the moves.
 */
@Command(name = "fetch-move", mixinStandardHelpOptions = true,
        description = {"bench fetch on a cluster with a move in the middle: embedded ZooKeeper, --servers server "
                + "processes, --clients threads pulling Zipf batches; at --move-at seconds one more server joins and "
                + "the controller moves slot groups to it while the pulls go on.",
            "Prints mean, p50, p99 and p99.9 latency per phase (before, during the moves, after), the ratio of "
                + "during to before, and how long the moves took; a progress line each second."})
final class ClusterFetchCommand implements Callable<Integer> {

    /** The phases a fetch can start in. */
    private enum Phase { BEFORE, DURING, AFTER }

    @Spec
    CommandSpec spec;

    @Option(names = "--servers", paramLabel = "<n>", defaultValue = "3", description = "Default: ${DEFAULT-VALUE}.")
    int servers;

    @Option(names = "--transport", paramLabel = "<t>", defaultValue = "shm",
            description = "shm, tcp or netty. Default: ${DEFAULT-VALUE}.")
    String transport;

    @Option(names = "--clients", paramLabel = "<n>", defaultValue = "2", description = "Client threads. Default: ${DEFAULT-VALUE}.")
    int clients;

    @Option(names = "--ids", paramLabel = "<n>", defaultValue = "100000",
            description = "Id space; every row is created before the run. Default: ${DEFAULT-VALUE}.")
    int ids;

    @Option(names = "--dimension", paramLabel = "<n>", defaultValue = "64", description = "Default: ${DEFAULT-VALUE}.")
    int dimension;

    @Option(names = "--batch", paramLabel = "<n>", defaultValue = "256", description = "Ids per fetch. Default: ${DEFAULT-VALUE}.")
    int batch;

    @Option(names = "--duration", paramLabel = "<s>", defaultValue = "30",
            description = "Seconds of fetches; longer while the moves are still running (at most --max-extra "
                    + "more), so that the run always ends with fetches after them. Default: ${DEFAULT-VALUE}.")
    int duration;

    @Option(names = "--max-extra", paramLabel = "<s>", defaultValue = "120",
            description = "At most this many seconds past --duration for moves that are still running, or "
                    + "for the join that starts them. Default: ${DEFAULT-VALUE}.")
    int maxExtra;

    /** Seconds of fetches after the moves, at least, when the run goes past --duration. */
    private static final int MIN_AFTER_SECONDS = 1;

    @Option(names = "--move-at", paramLabel = "<s>", defaultValue = "8",
            description = "When the extra server is started. Default: ${DEFAULT-VALUE}.")
    int moveAt;

    @Option(names = "--warmup", paramLabel = "<s>", defaultValue = "3",
            description = "Seconds of fetches first, not recorded (the JIT compiles both sides). Default: ${DEFAULT-VALUE}.")
    int warmup;

    @Option(names = "--dir", paramLabel = "<dir>", description = "Cluster directory. Default: a temporary one, removed after.")
    Path dir;

    @Override
    public Integer call() throws Exception {
        if (servers < 1 || clients < 1 || batch < 1 || ids < batch || moveAt < 1 || duration <= moveAt || maxExtra < 0) {
            throw new IllegalArgumentException("need --servers, --clients, --batch >= 1, --ids >= --batch, "
                    + "0 < --move-at < --duration and --max-extra >= 0");
        }
        java.io.PrintWriter out = spec.commandLine().getOut();
        PrintStream quiet = new PrintStream(java.io.OutputStream.nullOutputStream());
        Path directory = dir != null ? dir : Files.createTempDirectory("ferry-fetch-move");
        String report;
        try (ClusterLauncher cluster = ClusterLauncher.start(directory, "bench", servers, transport, 4_000, quiet);
                ClusterAdmin admin = ClusterAdmin.connect(cluster.config())) {
            TransportConfig client = TransportConfig.defaults(transport).withConnectTimeoutMillis(10_000);
            RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withDefaultDeadlineMillis(10_000);
            try (PsClient ps = PsClient.connect(rpc, client, admin.status().clientAddress())) {
                ps.createTable(TableConfig.of("fetch", dimension, Optimizer.sgd(0.1)).withMaxRows(ids));
                float[] rows = new float[ids * dimension];
                for (int from = 0; from < ids; from += batch) {
                    int n = Math.min(batch, ids - from);
                    long[] some = new long[n];
                    for (int j = 0; j < n; j++) {
                        some[j] = from + j;
                    }
                    System.arraycopy(ps.pull("fetch", some), 0, rows, from * dimension, n * dimension);
                }
                System.err.printf("fetch-move: %d servers on %s, %d rows created%n", servers, transport, ids);
                long settle = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (admin.status().assignment().move() != null) {
                    if (System.nanoTime() - settle > 0) {
                        throw new IllegalStateException("a move of the starting cluster did not finish within 60 s");
                    }
                    Thread.sleep(20);
                }
                report = run(ps, admin, directory, rows);
            }
        } finally {
            if (dir == null) {
                deleteTree(directory);
            }
        }
        // After the cluster stopped, so that the servers' shutdown lines do not bury it.
        out.print(report);
        out.flush();
        return 0;
    }

    /** The fetches and the move; returns the report. */
    private String run(PsClient ps, ClusterAdmin admin, Path directory, float[] rows) throws Exception {
        StringBuilder text = new StringBuilder();
        java.util.Formatter out = new java.util.Formatter(text, Locale.ROOT);
        Histogram[][] histograms = new Histogram[clients][Phase.values().length];
        for (Histogram[] h : histograms) {
            for (int p = 0; p < h.length; p++) {
                h[p] = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
            }
        }
        AtomicReference<Phase> phase = new AtomicReference<>(Phase.BEFORE);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long start = System.nanoTime();
        long recordFrom = start + TimeUnit.SECONDS.toNanos(warmup);
        long end = start + TimeUnit.SECONDS.toNanos(warmup + duration);
        long latest = end + TimeUnit.SECONDS.toNanos(maxExtra);
        java.util.concurrent.atomic.AtomicBoolean running = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<Thread> threads = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            Histogram[] mine = histograms[c];
            long seed = 31L * c + 7;
            threads.add(Thread.ofPlatform().name("fetch-" + c).start(() -> {
                ZipfSampler zipf = new ZipfSampler(ids, 1.09);
                SplittableRandom random = new SplittableRandom(seed);
                long[] request = new long[batch];
                float[] answer = new float[batch * dimension];
                try {
                    while (running.get() && failure.get() == null) {
                        for (int j = 0; j < batch; j++) {
                            request[j] = zipf.sample(random) - 1; // ranks are 1-based
                        }
                        Phase at = phase.get();
                        long t0 = System.nanoTime();
                        ps.pull("fetch", request, 0, batch, answer);
                        long t1 = System.nanoTime();
                        check(request, answer, rows, at);
                        if (t0 - recordFrom >= 0) {
                            mine[at.ordinal()].recordValue(Math.min(t1 - t0, TimeUnit.SECONDS.toNanos(60)));
                        }
                    }
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
            }));
        }
        // The extra server joins at --move-at; ClusterLauncher.add returns once the groups are spread again.
        Thread adder = null;
        long moveStart = 0;
        long moveEnd = 0;
        int moves = 0;
        long lastMoveId = -1;
        long nextProgress = start + TimeUnit.SECONDS.toNanos(1);
        AtomicReference<String> added = new AtomicReference<>();
        while (failure.get() == null) {
            long now = System.nanoTime();
            if (now - end >= 0 && (now - latest >= 0 || (phase.get() == Phase.AFTER
                    && now - moveEnd >= TimeUnit.SECONDS.toNanos(MIN_AFTER_SECONDS)))) {
                break;
            }
            if (adder == null && now - recordFrom >= TimeUnit.SECONDS.toNanos(moveAt)) {
                adder = Thread.ofPlatform().name("fetch-move-add").start(() -> {
                    try {
                        added.set(ClusterLauncher.add(directory, new PrintStream(java.io.OutputStream.nullOutputStream())));
                    } catch (Throwable t) {
                        failure.compareAndSet(null, t);
                    }
                });
            }
            // Only the moves the extra server brings count: one still settling from the start is waited out first.
            var move = adder != null ? admin.status().assignment().move() : null;
            if (move != null) {
                if (phase.get() == Phase.BEFORE) {
                    moveStart = now;
                    phase.set(Phase.DURING);
                }
                if (move.id() != lastMoveId) {
                    lastMoveId = move.id();
                    moves++;
                }
            } else if (phase.get() == Phase.DURING && added.get() != null) {
                moveEnd = now;
                phase.set(Phase.AFTER);
            }
            if (now - nextProgress >= 0) {
                nextProgress += TimeUnit.SECONDS.toNanos(1);
                System.err.printf(Locale.ROOT, "fetch-move: %ds of %d%s, %s, %d fetches%n",
                        TimeUnit.NANOSECONDS.toSeconds(Math.max(0, now - recordFrom)), duration,
                        now - end >= 0 ? " (longer: the moves are still running)" : "",
                        now - recordFrom < 0 ? "warm-up" : phase.get().name().toLowerCase(Locale.ROOT),
                        total(histograms));
            }
            Thread.sleep(10);
        }
        running.set(false);
        for (Thread t : threads) {
            t.join();
        }
        if (adder != null) {
            adder.join(120_000);
        }
        if (failure.get() != null) {
            throw new IllegalStateException("a fetch failed: " + failure.get(), failure.get());
        }
        if (moveStart == 0 || moveEnd == 0) {
            throw new IllegalStateException("the moves did not " + (moveStart == 0 ? "start" : "finish")
                    + " within --duration " + duration + " s and --max-extra " + maxExtra + " s more");
        }
        out.format("fetch on %d %s servers, %d clients, batch %d, dimension %d: server %s joined at %d s; "
                + "%d moves in flight for %.1f s; every fetched row checked unchanged%n", servers, transport, clients, batch, dimension, added.get(), moveAt,
                moves, (moveEnd - moveStart) / 1e9);
        out.format("phase     fetches    mean us    p50 us    p99 us  p99.9 us%n");
        Histogram[] merged = new Histogram[Phase.values().length];
        for (Phase p : Phase.values()) {
            Histogram h = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
            for (Histogram[] c : histograms) {
                h.add(c[p.ordinal()]);
            }
            merged[p.ordinal()] = h;
            out.format("%-8s %8d %10.1f %9.1f %9.1f %9.1f%n", p.name().toLowerCase(Locale.ROOT),
                    h.getTotalCount(), h.getMean() / 1e3, h.getValueAtPercentile(50) / 1e3,
                    h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3);
        }
        Histogram before = merged[Phase.BEFORE.ordinal()];
        Histogram during = merged[Phase.DURING.ordinal()];
        out.format("during / before: mean %.2fx, p99 %.2fx; client retries %d%n",
                during.getMean() / before.getMean(),
                (double) during.getValueAtPercentile(99) / before.getValueAtPercentile(99), ps.retries());
        return text.toString();
    }

    /** Every row as its first pull gave it: nothing pushes, so a move must carry each row unchanged. */
    private void check(long[] request, float[] answer, float[] rows, Phase at) {
        for (int j = 0; j < request.length; j++) {
            int id = (int) request[j];
            if (!java.util.Arrays.equals(answer, j * dimension, (j + 1) * dimension, rows, id * dimension,
                    (id + 1) * dimension)) {
                throw new IllegalStateException("row " + id + " changed " + at.name().toLowerCase(Locale.ROOT)
                        + " the moves: " + answer[j * dimension] + " instead of " + rows[id * dimension] + " at [0]");
            }
        }
    }

    private static long total(Histogram[][] histograms) {
        long n = 0;
        for (Histogram[] c : histograms) {
            for (Histogram h : c) {
                n += h.getTotalCount();
            }
        }
        return n;
    }

    private static void deleteTree(Path root) {
        try (var walk = Files.walk(root)) {
            walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException e) {
            System.err.println("fetch-move: could not remove " + root + ": " + e.getMessage());
        }
    }
}
