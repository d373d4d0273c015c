package dev.ferry.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ferry.cluster.Assignment;
import dev.ferry.cluster.ClusterAdmin;
import dev.ferry.cluster.ClusterLauncher;
import dev.ferry.cluster.Move;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;

/**
 * The demo's cluster changes: while two threads push to a table of its own (SGD, learning rate
 * 1, zero rows, each push a unique integer gradient, so every row is an exact sum) and one pulls
 * it, one server joins and then one of the first leaves cleanly; every new generation with a move
 * and a progress line each second go to standard error. At the end every row must equal the sum
 * of the pushes acknowledged to it: none lost, none applied twice.
 */
final class DemoRebalance {

    static final String TABLE = "exact";
    static final int DIMENSION = 4;
    private static final int BATCH = 16;
    private static final int PUSHERS = 2;
    /** Sums of integers stay exact in a float below this. */
    private static final double EXACT = 1 << 24;

    /** What the changes showed, and the check's verdict, as lines for the end of the output. */
    record Result(String summary) {
    }

    private final PsClient client;
    private final int ids;
    private final double[] acked;
    private final AtomicInteger nextGradient = new AtomicInteger(1);
    private final AtomicLong pushes = new AtomicLong();
    private final AtomicLong pulls = new AtomicLong();
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();

    private DemoRebalance(PsClient client, int ids) {
        this.client = client;
        this.ids = ids;
        this.acked = new double[ids];
    }

    /**
     * Runs the workload across a join and a leave on {@code cluster}; returns the summary.
     *
     * @throws IllegalStateException with the reason if a push or pull failed, a change did not
     *                               complete, or a row differs from the exact sum
     */
    static Result run(ClusterLauncher cluster, ClusterAdmin admin, PsClient client, String label, int ids,
            PrintWriter err) throws Exception {
        client.createTable(TableConfig.of(TABLE, DIMENSION, Optimizer.sgd(1.0)).withMaxRows(ids));
        DemoRebalance w = new DemoRebalance(client, ids);
        List<Thread> threads = new ArrayList<>();
        for (int p = 0; p < PUSHERS; p++) {
            long seed = 17L * p + 1;
            threads.add(Thread.ofPlatform().name("ferry-demo-pusher-" + p).start(() -> w.push(seed)));
        }
        threads.add(Thread.ofPlatform().name("ferry-demo-puller").start(w::pull));
        Watch watch = new Watch(admin, w, label, err);
        StringBuilder summary = new StringBuilder();
        // A move that starts and fails between two of the watch's looks shows only here; if the
        // watch cannot start, the finally below still stops the workload.
        try (AutoCloseable _ = admin.watchMoves((id, state) -> {
            if (state.startsWith("failed")) {
                err.printf(Locale.ROOT, "ferry demo: %s: move %d %s%n", label, id, state);
                err.flush();
            }
        })) {
            err.printf(Locale.ROOT, "ferry demo: %s: training on table '%s' (%,d rows, SGD lr 1, unique integer "
                    + "gradients) while the cluster changes%n", label, TABLE, ids);
            watch.await(2_000, null);
            long g0 = admin.status().assignment().generation();
            long t0 = System.nanoTime();
            long moves0 = admin.status().assignment().nextMoveId();
            AtomicReference<String> added = new AtomicReference<>();
            watch.await(-1, Thread.ofPlatform().name("ferry-demo-add").start(() -> {
                try {
                    added.set(cluster.addServer());
                } catch (Throwable t) {
                    w.failure.compareAndSet(null, new IllegalStateException("adding a server: " + ClusterDemo.reason(t), t));
                }
            }));
            w.check("adding a server");
            summary.append(watch.changed(added.get() + " joined", g0, t0, moves0));
            String leaving = leaver(admin.status().members().keySet(), added.get());
            long g1 = admin.status().assignment().generation();
            long t1 = System.nanoTime();
            long moves1 = admin.status().assignment().nextMoveId();
            watch.await(-1, Thread.ofPlatform().name("ferry-demo-remove").start(() -> {
                try {
                    cluster.removeServer(leaving);
                } catch (Throwable t) {
                    w.failure.compareAndSet(null, new IllegalStateException("removing " + leaving + ": "
                            + ClusterDemo.reason(t), t));
                }
            }));
            w.check("removing " + leaving);
            summary.append(watch.changed(leaving + " left", g1, t1, moves1));
            watch.await(1_000, null);
        } finally {
            w.stop.set(true);
            for (Thread t : threads) {
                t.join(60_000);
            }
        }
        w.check("the workload");
        summary.insert(0, String.format(Locale.ROOT, "Cluster changes on %s while training (table '%s', %,d rows):%n",
                label, TABLE, ids));
        summary.append(String.format(Locale.ROOT, "  the client followed every change: %,d routing refreshes, %,d "
                + "retried requests, the same client throughout%n", client.refreshes(), client.retries()));
        summary.append(w.verify());
        return new Result(summary.toString());
    }

    /** One of the members the cluster started with (not the one just added): the second, s1. */
    private static String leaver(java.util.Set<String> members, String added) {
        return members.contains("s1") && !"s1".equals(added) ? "s1"
                : members.stream().filter(m -> !m.equals(added)).findFirst().orElseThrow();
    }

    private void push(long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        long[] batch = new long[BATCH];
        float[] gradients = new float[BATCH * DIMENSION];
        try {
            while (!stop.get() && failure.get() == null) {
                for (int i = 0; i < BATCH; i++) {
                    batch[i] = random.nextInt(ids);
                }
                int k = nextGradient.getAndIncrement();
                java.util.Arrays.fill(gradients, -k); // SGD with lr 1: each row gains k per occurrence
                client.push(TABLE, batch, gradients);
                synchronized (acked) {
                    for (long id : batch) {
                        acked[(int) id] += k;
                    }
                }
                pushes.incrementAndGet();
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, new IllegalStateException("a push failed: " + ClusterDemo.reason(t), t));
        }
    }

    private void pull() {
        SplittableRandom random = new SplittableRandom(99);
        long[] batch = new long[256];
        try {
            while (!stop.get() && failure.get() == null) {
                for (int i = 0; i < batch.length; i++) {
                    batch[i] = random.nextInt(ids);
                }
                client.pull(TABLE, batch);
                pulls.incrementAndGet();
            }
        } catch (Throwable t) {
            failure.compareAndSet(null, new IllegalStateException("a pull failed: " + ClusterDemo.reason(t), t));
        }
    }

    private void check(String during) {
        Throwable t = failure.get();
        if (t != null) {
            throw new IllegalStateException(t.getMessage() + " (" + during + ")", t);
        }
    }

    /** Every row against the exact sum of its acknowledged pushes; the verdict line, or a throw. */
    private String verify() {
        long[] all = new long[ids];
        for (int i = 0; i < ids; i++) {
            all[i] = i;
        }
        float[] rows = client.pull(TABLE, all);
        int wrong = 0;
        String first = null;
        double max = 0;
        for (int i = 0; i < ids; i++) {
            max = Math.max(max, acked[i]);
            for (int j = 0; j < DIMENSION; j++) {
                if (rows[i * DIMENSION + j] != (float) acked[i]) {
                    wrong++;
                    if (first == null) {
                        first = String.format(Locale.ROOT, "row %d holds %.0f, the acknowledged pushes sum to %.0f",
                                i, rows[i * DIMENSION + j], acked[i]);
                    }
                }
            }
        }
        if (wrong > 0) {
            throw new IllegalStateException("exact sums: " + wrong + " of " + ids * DIMENSION + " values differ; "
                    + first);
        }
        if (max >= EXACT) {
            throw new IllegalStateException("exact sums: a row reached " + max + ", beyond what a float holds exactly");
        }
        return String.format(Locale.ROOT, "  exact sums: OK, all %,d rows equal the sum of their acknowledged pushes "
                + "(%,d pushes, %,d pulls): none lost, none applied twice%n", ids, pushes.get(), pulls.get());
    }

    /** Polls the cluster, prints every new move and a progress line each second. */
    private static final class Watch {
        private final ClusterAdmin admin;
        private final DemoRebalance w;
        private final String label;
        private final PrintWriter err;
        private final long start = System.nanoTime();
        private long nextProgress = start + TimeUnit.SECONDS.toNanos(1);
        private long lastMove = -1;
        private long generation = -1;

        Watch(ClusterAdmin admin, DemoRebalance w, String label, PrintWriter err) {
            this.admin = admin;
            this.w = w;
            this.label = label;
            this.err = err;
        }

        /** Watches for {@code millis} (or, if negative, until {@code change} ended, at most 180 s). */
        void await(long millis, Thread change) throws InterruptedException {
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis < 0 ? 180_000 : millis);
            while (System.nanoTime() - end < 0 && (change == null || change.isAlive()) && w.failure.get() == null) {
                poll();
                Thread.sleep(50);
            }
            if (change != null && change.isAlive()) {
                change.interrupt();
                change.join(10_000);
                w.failure.compareAndSet(null, new IllegalStateException("the change did not complete within 180 s"));
            }
            poll();
        }

        private void poll() {
            Assignment a = admin.status().assignment();
            Move move = a.move();
            if (a.generation() != generation) {
                generation = a.generation();
                if (move != null && move.id() != lastMove) {
                    lastMove = move.id();
                    err.printf(Locale.ROOT, "ferry demo: %s: generation %d: move %d: %d groups %s -> %s%s%n", label,
                            generation, move.id(), move.size(), move.from(), move.to(),
                            move.copy() ? " (a backup copy)" : "");
                }
            }
            long now = System.nanoTime();
            if (now - nextProgress >= 0) {
                nextProgress += TimeUnit.SECONDS.toNanos(1);
                err.printf(Locale.ROOT, "ferry demo: %-10s changes %5.1f s  pushes %,8d  pulls %,7d  generation %d%s%n",
                        label, (now - start) / 1e9, w.pushes.get(), w.pulls.get(), generation,
                        move == null ? "" : "  moving " + move.size() + " groups " + move.from() + " -> " + move.to());
            }
            err.flush();
        }

        /** The summary line of one change, printed now too. */
        String changed(String what, long fromGeneration, long startNanos, long firstMoveId) {
            ClusterAdmin.Status s = admin.status();
            StringBuilder spread = new StringBuilder();
            for (Map.Entry<String, Integer> e : new java.util.TreeMap<>(s.assignment().groupCounts()).entrySet()) {
                if (s.members().containsKey(e.getKey())) {
                    spread.append(spread.isEmpty() ? "" : ", ").append(e.getKey()).append(' ').append(e.getValue());
                }
            }
            String line = String.format(Locale.ROOT, "  %s in %.1f s: generation %d -> %d, %d moves; groups now %s%n",
                    what, (System.nanoTime() - startNanos) / 1e9, fromGeneration, s.assignment().generation(),
                    s.assignment().nextMoveId() - firstMoveId, spread);
            err.print("ferry demo: " + label + ":" + line.substring(1));
            err.flush();
            return line;
        }
    }
}
