package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
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

    private static final long START_TIMEOUT_MILLIS = 120_000;

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
        double share = HostSteal.share(from, to);
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
        try (Cluster cluster = Cluster.start(c, netlab, transport, true, metrics, "sgd", o.clientProcesses, o.clients,
                replicas,
                Args.of()
                .with("workload", "fetch")
                .with("alpha", o.alpha())
                .with("batchMin", o.minBatch())
                .with("batchMax", o.maxBatch())
                .with("concurrency", o.concurrencyPerThread())
                .with("rate", o.rate / o.clientProcesses)
                .with("pullFormat", format))) {
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

    /** A transport's run of {@code push}, with Ferry's flow control on or off. */
    RunResult push(PushOptions o, BenchTransport transport, boolean flowControl) {
        return push(o, transport, flowControl, 0);
    }

    /** {@link #push(PushOptions, BenchTransport, boolean)} on cluster members with {@code replicas} copies (0: fixed). */
    RunResult push(PushOptions o, BenchTransport transport, boolean flowControl, int replicas) {
        BenchOptions c = o.common;
        try (Cluster cluster = Cluster.start(c, netlab, transport, flowControl, c.metricsPort != null, "adagrad",
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

    /** The processes of one run. */
    private static final class Cluster implements AutoCloseable {
        final BenchOptions options;
        final BenchTransport transport;
        final boolean flowControl;
        final boolean metrics;
        BenchMetrics.Scraper scraper;
        final List<Child> servers = new ArrayList<>();
        final List<Child> workers = new ArrayList<>();
        final List<String> addresses = new ArrayList<>();

        private Cluster(BenchOptions options, BenchTransport transport, boolean flowControl, boolean metrics) {
            this.options = options;
            this.transport = transport;
            this.flowControl = flowControl;
            this.metrics = metrics;
        }

        /** The metrics port of server {@code i} (0 when off); client process {@code p} has that of i = servers + p. */
        int metricsPort(int i) {
            return metrics ? options.metricsBase() + i : 0;
        }

        /**
         * Starts the servers and, at the same time, {@code processes} client processes sharing
         * {@code threads} threads with the workload's {@code args}; returns once all are ready.
         */
        static Cluster start(BenchOptions o, Netlab netlab, BenchTransport transport, boolean flowControl,
                boolean metrics, String optimizer, int processes, int threads, int replicas, Args workload) {
            Cluster cluster = new Cluster(o, transport, flowControl, metrics);
            // In-process runs: the servers live in the one client process, with every client thread.
            boolean inProcess = transport.inProcess();
            if (inProcess) {
                processes = 1;
                workload = workload.with("servers", o.servers)
                        .with("serverThreads", o.serverThreads)
                        .with("optimizer", optimizer)
                        .with("inlinePulls", o.inlinePulls());
            }
            int serverCount = inProcess ? 0 : netlab != null ? 1 : o.servers;
            if (netlab != null) {
                // One receiver; a worker process per sender namespace, as many as the threads or the hosts.
                processes = Math.min(threads, o.netlabHosts > 0 ? Math.min(o.netlabHosts, netlab.hosts()) : netlab.hosts());
            }
            try {
                for (int i = 0; i < serverCount; i++) {
                    Args args = Args.of()
                            .with("transport", transport.label())
                            .with("dimension", o.dimension)
                            .with("ids", o.ids)
                            .with("index", i)
                            .with("servers", o.servers)
                            .with("threads", o.serverThreads)
                            .with("optimizer", optimizer)
                            .with("flowControl", flowControl)
                            .with("psTuning", o.psTuning())
                            .with("inlinePulls", o.inlinePulls())
                            .with("metricsPort", cluster.metricsPort(i))
                            .with("replicas", replicas);
                    List<String> prefix = List.of();
                    if (netlab != null) {
                        args.with("servers", 1).with("bindHost", Netlab.RECEIVER_HOST);
                        if (flowControl && transport.ferry()) {
                            // Receiver-driven pacing of the pushes' rendezvous pulls, sized from the lab's link.
                            args.with("pullBudget", o.pullBudget >= 0 ? o.pullBudget : netlab.pullBudget());
                        }
                        prefix = Netlab.in(netlab.receiverNamespace());
                    }
                    cluster.servers.add(Child.start("server " + i, prefix, PsBenchServer.class, o.childJvm(),
                            args.toList()));
                }
                for (int p = 0; p < processes; p++) {
                    int mine = threads / processes + (p < threads % processes ? 1 : 0);
                    List<String> args = new ArrayList<>(workload.toList());
                    args.addAll(Args.of()
                            .with("transport", transport.label())
                            .with("dimension", o.dimension)
                            .with("threads", mine)
                            .with("ids", o.ids)
                            .with("seed", o.seed * 131 + p)
                            .with("bindHost", netlab != null ? Netlab.senderHost(p) : BenchTransport.loopback(o.servers + p))
                            .with("flowControl", flowControl)
                            .with("psTuning", o.psTuning())
                            .with("metricsPort", cluster.metricsPort(o.servers + p)).toList());
                    cluster.workers.add(Child.start("client " + p,
                            netlab != null ? Netlab.in(netlab.senderNamespace(p)) : List.of(),
                            PsBenchWorker.class, o.childJvm(), args));
                }
                for (Child server : cluster.servers) {
                    cluster.addresses.add(server.expect("READY", START_TIMEOUT_MILLIS));
                }
                if (replicas > 0) {
                    // Members: each installs the routing table and replicas naming every server.
                    cluster.sendAll(cluster.servers, "TABLE " + String.join(",", cluster.addresses));
                    for (Child server : cluster.servers) {
                        server.expect("INSTALLED", START_TIMEOUT_MILLIS);
                    }
                }
                cluster.sendAll(cluster.workers, "SERVERS " + (inProcess ? "in-process" : String.join(",", cluster.addresses)));
                for (Child worker : cluster.workers) {
                    worker.expect("READY", START_TIMEOUT_MILLIS);
                }
                if (metrics) {
                    List<Integer> ports = new ArrayList<>();
                    for (int i = 0; i < cluster.servers.size(); i++) {
                        ports.add(cluster.metricsPort(i));
                    }
                    for (int p = 0; p < cluster.workers.size(); p++) {
                        ports.add(cluster.metricsPort(o.servers + p));
                    }
                    cluster.scraper = new BenchMetrics.Scraper(ports);
                }
                return cluster;
            } catch (RuntimeException e) {
                cluster.close();
                throw e;
            }
        }

        void sendAll(List<Child> children, String line) {
            for (Child child : children) {
                child.send(line);
            }
        }

        long cpuNanos() {
            return CpuTime.nanos(pids());
        }

        /** CPU time of the processes' JIT compiler threads so far (a lower bound, {@link CpuTime#compilerNanos}). */
        long compilerNanos() {
            return CpuTime.compilerNanos(pids());
        }

        private List<Long> pids() {
            List<Long> pids = new ArrayList<>();
            servers.forEach(s -> pids.add(s.pid()));
            workers.forEach(w -> pids.add(w.pid()));
            return pids;
        }

        RunResult collect(String workload, BenchTransport transport, boolean flowControl, List<Child> from,
                long cpuNanos, Histogram steps) {
            Histogram latency = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
            long ops = 0;
            long keys = 0;
            long errors = 0;
            double seconds = 0;
            Map<String, Long> counters = new LinkedHashMap<>();
            for (Child worker : from) {
                String line = worker.expect("RESULT", START_TIMEOUT_MILLIS);
                for (String field : line.split(" ")) {
                    int eq = field.indexOf('=');
                    String key = field.substring(0, eq);
                    String value = field.substring(eq + 1);
                    switch (key) {
                        case "hist" -> latency.add(PsBenchWorker.decode(value));
                        case "ops" -> ops += Long.parseLong(value);
                        case "keys" -> keys += Long.parseLong(value);
                        case "errors" -> errors += Long.parseLong(value);
                        case "seconds" -> seconds = Math.max(seconds, Double.parseDouble(value));
                        default -> merge(counters, key.substring(2), Long.parseLong(value));
                    }
                }
            }
            for (Child server : servers) {
                server.send("STATS");
                String line = server.expect("STATS", START_TIMEOUT_MILLIS);
                for (String field : line.split(" ")) {
                    int eq = field.indexOf('=');
                    if (eq > 0) {
                        merge(counters, field.substring(0, eq), Long.parseLong(field.substring(eq + 1)));
                    }
                }
            }
            if (scraper != null) {
                counters.put("metrics_scrapes", scraper.scrapes());
                counters.put("metrics_scrape_failures", scraper.failures());
            }
            String label = transport.label() + (metrics && options.metricsRounds > 0 ? "+metrics" : "");
            return new RunResult(workload, label, flowControl, latency, ops, keys, errors, seconds,
                    cpuNanos, steps, counters);
        }

        /** Sums counters over processes; peaks and levels take the maximum. */
        private static void merge(Map<String, Long> counters, String key, long value) {
            boolean peak = key.contains("peak") || key.endsWith("links_open") || key.endsWith("credits_available");
            counters.merge(key, value, peak ? Math::max : Long::sum);
        }

        @Override
        public void close() {
            if (scraper != null) {
                scraper.close();
            }
            for (Child worker : workers) {
                worker.close();
            }
            for (Child server : servers) {
                server.close();
            }
        }
    }
}
