package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.HdrHistogram.Histogram;

/**
 * Runs one transport's case of a benchmark: starts the server and client processes, warms up,
 * measures for a fixed time (CPU read from every process at both ends), collects results and
 * counters, and stops every child by its PID.
 */
final class BenchDriver {

    static final long START_TIMEOUT_MILLIS = 120_000;

    private final PrintStream progress;
    /** The emulated network the processes run in, or null on loopback. */
    private final Netlab netlab;

    BenchDriver(PrintStream progress) {
        this(progress, null);
    }

    BenchDriver(PrintStream progress, Netlab netlab) {
        this.progress = progress;
        this.netlab = netlab;
    }

    private Map<String, Long> network() {
        return netlab == null ? Map.of() : netlab.counters();
    }

    /** The share of a run's CPU in its JIT compilers above which the progress stream says so. */
    static final double COMPILER_SHARE_NOTE = 0.05;

    /** The network's counters over the measured interval join the result's. */
    private RunResult withNetwork(RunResult r, Map<String, Long> before) {
        if (netlab != null) {
            r.counters().putAll(Netlab.delta(before, netlab.counters()));
        }
        return r;
    }

    /**
     * On the emulated network, what bounds a push step from below ({@link StepBounds}): its bytes
     * on the receiver's port, and the lab's CPU per step spread over this host's cores. Says so on
     * the progress stream where the CPU bound is the higher one: the step measured the host's cores,
     * not the network.
     */
    private RunResult withStepBounds(RunResult r) {
        if (netlab == null) {
            return r;
        }
        StepBounds bounds = StepBounds.of(r, netlab.rateBitsPerSecond(), Runtime.getRuntime().availableProcessors());
        if (bounds == null) {
            return r;
        }
        r.counters().put("step_wire_us", bounds.wireMicros());
        r.counters().put("step_cpu_floor_us", bounds.cpuFloorMicros());
        if (bounds.cpuBound()) {
            progress.println("  note: " + bounds.describe(r.label()));
        }
        return r;
    }

    /**
     * Adds the JIT compilers' CPU in the measured interval ({@code compiler_cpu_us}) and says so on
     * the progress stream where it is more than {@link #COMPILER_SHARE_NOTE} of the run's CPU: the
     * run measured a warm-up, not a steady state.
     */
    private RunResult withCompilers(RunResult r, long compilerNanos) {
        long nanos = Math.max(0, compilerNanos);
        r.counters().put("compiler_cpu_us", nanos / 1_000);
        if (r.cpuNanos() > 0 && nanos > COMPILER_SHARE_NOTE * r.cpuNanos()) {
            progress.printf(Locale.ROOT, "  note: %s: the JIT compilers took %.0f%% of the measured CPU; a longer"
                    + " --warmup measures the steady state%n", r.label(), 100.0 * nanos / r.cpuNanos());
        }
        return r;
    }

    /**
     * Adds the share of the guest's CPU time that other guests took over the measured interval
     * ({@link HostSteal#COUNTER}) and says so on the progress stream where it disturbed the run.
     */
    private RunResult withSteal(RunResult r, HostSteal from, HostSteal to) {
        return withSteal(r, HostSteal.share(from, to));
    }

    /** {@link #withSteal(RunResult, HostSteal, HostSteal)} with the share already known (NaN: none). */
    private RunResult withSteal(RunResult r, double share) {
        if (Double.isFinite(share)) {
            r.counters().put(HostSteal.COUNTER, Math.round(share * 1000));
            if (HostSteal.disturbed(r)) {
                progress.printf(Locale.ROOT, "  note: %s: other guests of this host took %.0f%% of its cores while it"
                        + " was measured (steal); the run measured the host%n", r.label(), 100 * share);
            }
        }
        return r;
    }

    /** A transport's run of {@code fetch}, with metrics if {@code --metrics-port} is given. */
    RunResult fetch(FetchOptions o, BenchTransport transport) {
        return fetch(o, transport, o.common.metricsPort != null);
    }

    /** A transport's run of {@code fetch}, with every process's metrics served and scraped if {@code metrics}. */
    RunResult fetch(FetchOptions o, BenchTransport transport, boolean metrics) {
        return fetch(o, transport, metrics, dev.ferry.ps.PullFormat.F32);
    }

    /**
     * A transport's run of {@code fetch} with pulls in {@code format}; a result of another format
     * than f32 is labelled {@code <transport>-<format>}.
     */
    RunResult fetch(FetchOptions o, BenchTransport transport, boolean metrics, dev.ferry.ps.PullFormat format) {
        return fetch(o, transport, metrics, format, 0);
    }

    /**
     * {@link #fetch(FetchOptions, BenchTransport, boolean, dev.ferry.ps.PullFormat)} on cluster
     * members with {@code replicas} copies of every group (0: a fixed cluster), labelled so.
     */
    RunResult fetch(FetchOptions o, BenchTransport transport, boolean metrics, dev.ferry.ps.PullFormat format,
            int replicas) {
        BenchOptions c = o.common;
        try (BenchCluster cluster = startFetch(o, transport, metrics, format, replicas)) {
            List<Child> workers = cluster.workers;
            cluster.sendAll(workers, "RUN");
            wait("fetch", transport.label(), "warm-up", c.warmup(FetchOptions.WARMUP_SECONDS), null);
            cluster.sendAll(cluster.servers, "RESET");
            Map<String, Long> net0 = network();
            long cpu0 = cluster.cpuNanos();
            long jit0 = cluster.compilerNanos();
            HostSteal steal0 = HostSteal.now();
            cluster.sendAll(workers, "MEASURE");
            wait("fetch", transport.label(), "measuring", c.durationSeconds, workers);
            cluster.sendAll(workers, "STOP");
            long cpu1 = cluster.cpuNanos();
            long jit1 = cluster.compilerNanos();
            HostSteal steal1 = HostSteal.now();
            RunResult r = withSteal(withCompilers(withNetwork(cluster.collect("fetch", transport, true, workers,
                    cpu1 - cpu0, null), net0), jit1 - jit0), steal0, steal1);
            r = format == dev.ferry.ps.PullFormat.F32 ? r : r.withTransport(r.transport() + "-" + format);
            return replicas == 0 ? r : r.withTransport(BenchOptions.withReplicas(r.transport(), replicas));
        }
    }

    /** Starts a transport's fetch processes (servers and clients, ready to run). */
    BenchCluster startFetch(FetchOptions o, BenchTransport transport, boolean metrics,
            dev.ferry.ps.PullFormat format, int replicas) {
        return BenchCluster.start(o.common, netlab, transport, true, metrics, "sgd", o.clientProcesses, o.clients,
                replicas,
                Args.of()
                .with("workload", "fetch")
                .with("alpha", o.alpha())
                .with("batchMin", o.minBatch())
                .with("batchMax", o.maxBatch())
                .with("concurrency", o.concurrencyPerThread())
                .with("rate", o.rate / o.clientProcesses)
                .with("pullFormat", format));
    }

    /** Seconds a transport's processes run unmeasured after they resume, before their slice: threads wake, caches refill. */
    static final double SETTLE_SECONDS = 0.25;

    /**
     * {@code fetch} on all of {@code transports} at once, measured in turn ({@code --interleave}):
     * each transport's processes start, warm up and then wait (paused), one transport after the
     * other; then, cycle after cycle, each transport runs {@code slice} seconds measured (after
     * {@link #SETTLE_SECONDS} unmeasured) while the others wait, until each has {@code --duration}
     * seconds. Each row's CPU, compiler time and steal are those of its own slices, so a host that
     * slows down for a minute slows every row alike instead of whichever row it met.
     */
    List<RunResult> fetchInterleaved(FetchOptions o, List<BenchTransport> transports, double slice) {
        BenchOptions c = o.common;
        List<BenchCluster> clusters = new ArrayList<>();
        try {
            for (BenchTransport transport : transports) {
                BenchCluster cluster = startFetch(o, transport, false, dev.ferry.ps.PullFormat.F32, 0);
                clusters.add(cluster);
                cluster.sendAll(cluster.workers, "RUN");
                wait("fetch", transport.label(), "warm-up", c.warmup(FetchOptions.WARMUP_SECONDS), null);
                pause(cluster);
                cluster.sendAll(cluster.servers, "RESET");
            }
            int n = clusters.size();
            long[] cpu = new long[n];
            long[] jit = new long[n];
            HostSteal[] steal = new HostSteal[n];
            Arrays.fill(steal, HostSteal.NONE);
            int cycles = (int) Math.max(1, Math.ceil(c.durationSeconds / slice - 1e-9));
            for (int cycle = 0; cycle < cycles; cycle++) {
                for (int j = 0; j < n; j++) {
                    int k = (cycle + j) % n; // each cycle starts one transport later
                    BenchCluster cluster = clusters.get(k);
                    cluster.sendAll(cluster.workers, "RESUME");
                    sleep(SETTLE_SECONDS);
                    long cpu0 = cluster.cpuNanos();
                    long jit0 = cluster.compilerNanos();
                    HostSteal steal0 = HostSteal.now();
                    cluster.sendAll(cluster.workers, "MEASURE");
                    sleep(slice);
                    pause(cluster);
                    cpu[k] += cluster.cpuNanos() - cpu0;
                    jit[k] += cluster.compilerNanos() - jit0;
                    HostSteal steal1 = HostSteal.now();
                    if (steal0 != null && steal1 != null) {
                        steal[k] = steal[k].plus(steal1.since(steal0));
                    }
                }
                progress.printf(Locale.ROOT, "  fetch interleaved  cycle %d/%d  %.1f/%.0f s measured per transport%n",
                        cycle + 1, cycles, (cycle + 1) * slice, c.durationSeconds);
            }
            List<RunResult> results = new ArrayList<>();
            for (int k = 0; k < n; k++) {
                BenchCluster cluster = clusters.get(k);
                cluster.sendAll(cluster.workers, "STOP");
                RunResult r = withCompilers(cluster.collect("fetch", transports.get(k), true, cluster.workers, cpu[k],
                        null), jit[k]);
                results.add(withSteal(r, steal[k].share()));
            }
            return results;
        } finally {
            for (BenchCluster cluster : clusters) {
                cluster.close();
            }
        }
    }

    /** Pauses a cluster's workers and waits until each says every thread has stopped. */
    static void pause(BenchCluster cluster) {
        cluster.sendAll(cluster.workers, "PAUSE");
        for (Child worker : cluster.workers) {
            worker.expect("PAUSED", START_TIMEOUT_MILLIS);
        }
    }

    private static void sleep(double seconds) {
        try {
            Thread.sleep((long) (seconds * 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted");
        }
    }

    /** A transport's run of {@code push}, with Ferry's flow control on or off. */
    RunResult push(PushOptions o, BenchTransport transport, boolean flowControl) {
        return push(o, transport, flowControl, 0);
    }

    /** {@link #push(PushOptions, BenchTransport, boolean)} on cluster members with {@code replicas} copies (0: fixed). */
    RunResult push(PushOptions o, BenchTransport transport, boolean flowControl, int replicas) {
        BenchOptions c = o.common;
        try (BenchCluster cluster = BenchCluster.start(c, netlab, transport, flowControl, c.metricsPort != null, "adagrad",
                o.workerProcesses, o.workers, replicas,
                Args.of()
                        .with("workload", "push")
                        .with("alpha", o.alpha())
                        .with("batchMin", o.batch)
                        .with("batchMax", o.batch)
                        .with("concurrency", 1)
                        .with("rate", 0))) {
            List<Child> workers = cluster.workers;
            cluster.sendAll(workers, "RUN");
            String label = BenchOptions.withReplicas(transport.label(), replicas) + (flowControl ? "" : "-nofc");
            Histogram steps = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
            long start = System.nanoTime();
            double warmup = c.warmup(PushOptions.WARMUP_SECONDS);
            long measureFrom = start + (long) (warmup * 1e9);
            long measureUntil = Long.MAX_VALUE;
            long cpu0 = 0;
            long jit0 = 0;
            HostSteal steal0 = null;
            Map<String, Long> net0 = Map.of();
            long released = 0;
            boolean measuring = false;
            long lastPrint = 0;
            JitSettle settle = c.settle != null ? new JitSettle(c.settle) : null;
            long warmedNanos = 0;
            while (true) {
                for (Child worker : workers) {
                    worker.expect("STEP", START_TIMEOUT_MILLIS);
                }
                long now = System.nanoTime();
                if (measuring && released != 0) {
                    steps.recordValue(Math.min(now - released, steps.getHighestTrackableValue()));
                }
                String go;
                if (!measuring && now >= measureFrom
                        && (settle == null || settle.settled(now, cluster::cpuNanos, cluster::compilerNanos))) {
                    warmedNanos = now - start;
                    if (settle != null && settle.timedOut()) {
                        progress.printf(Locale.ROOT, "  note: %s: the JIT compilers still took %.0f%% of the CPU after "
                                + "%.0f s of warm-up; measuring anyway%n", label, 100 * settle.lastShare(), warmedNanos / 1e9);
                    }
                    cluster.sendAll(cluster.servers, "RESET");
                    net0 = network();
                    cpu0 = cluster.cpuNanos();
                    jit0 = cluster.compilerNanos();
                    steal0 = HostSteal.now();
                    measuring = true;
                    measureUntil = now + (long) (c.durationSeconds * 1e9);
                    go = "GO measure";
                } else if (measuring && now >= measureUntil) {
                    go = "GO stop";
                } else {
                    go = measuring ? "GO measure" : "GO warm";
                }
                if (now - lastPrint > 1_000_000_000L) {
                    lastPrint = now;
                    double elapsed = measuring ? (now - (measureUntil - (long) (c.durationSeconds * 1e9))) / 1e9
                            : (now - start) / 1e9;
                    String compilers = settle != null && !measuring && !Double.isNaN(settle.lastShare())
                            ? String.format(Locale.ROOT, "  compilers %.0f%% of the CPU", 100 * settle.lastShare()) : "";
                    progress.printf(Locale.ROOT, "  push %-10s %-9s %5.1f/%.0f s  steps %d%s%n", label,
                            measuring ? "measuring" : "warm-up", elapsed,
                            measuring ? c.durationSeconds : warmup, steps.getTotalCount(), compilers);
                }
                if (go.equals("GO stop")) {
                    long cpu1 = cluster.cpuNanos();
                    long jit1 = cluster.compilerNanos();
                    HostSteal steal1 = HostSteal.now();
                    cluster.sendAll(workers, go);
                    RunResult r = withSteal(withStepBounds(withCompilers(withNetwork(cluster.collect("push", transport,
                            flowControl, workers, cpu1 - cpu0, steps), net0), jit1 - jit0)), steal0, steal1);
                    r.counters().put("warmup_ms", warmedNanos / 1_000_000);
                    return replicas == 0 ? r : r.withTransport(BenchOptions.withReplicas(r.transport(), replicas));
                }
                cluster.sendAll(workers, go);
                released = System.nanoTime();
            }
        }
    }

    private void wait(String workload, String transport, String phase, double seconds, List<Child> workers) {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long begin = System.nanoTime();
        ProgressRate rates = workers == null ? null : new ProgressRate(workers.size());
        ProgressRate.Report[] latest = workers == null ? null : new ProgressRate.Report[workers.size()];
        while (true) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                return;
            }
            try {
                Thread.sleep(Math.min(TimeUnit.NANOSECONDS.toMillis(left) + 1, 1_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted");
            }
            long now = System.nanoTime();
            String rate = "";
            if (workers != null) {
                for (int i = 0; i < latest.length; i++) {
                    latest[i] = workers.get(i).progress();
                }
                rate = String.format(Locale.ROOT, "  %,.0f ops/s", rates.update(latest));
            }
            progress.printf(Locale.ROOT, "  %s %-10s %-9s %5.1f/%.0f s%s%n", workload, transport, phase,
                    (now - begin) / 1e9, seconds, rate);
        }
    }
}
