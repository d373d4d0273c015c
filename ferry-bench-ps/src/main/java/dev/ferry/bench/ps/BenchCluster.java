package dev.ferry.bench.ps;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.HdrHistogram.Histogram;

/**
 * The processes of one benchmark run: its server and client (worker) processes, started
 * together, their CPU read by PID, their results collected, and each stopped by its PID on close.
 */
final class BenchCluster implements AutoCloseable {
    final BenchOptions options;
    final BenchTransport transport;
    final boolean flowControl;
    final boolean metrics;
    BenchMetrics.Scraper scraper;
    final List<Child> servers = new ArrayList<>();
    final List<Child> workers = new ArrayList<>();
    final List<String> addresses = new ArrayList<>();

    private BenchCluster(BenchOptions options, BenchTransport transport, boolean flowControl, boolean metrics) {
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
    static BenchCluster start(BenchOptions o, Netlab netlab, BenchTransport transport, boolean flowControl,
            boolean metrics, String optimizer, int processes, int threads, int replicas, Args workload) {
        BenchCluster cluster = new BenchCluster(o, transport, flowControl, metrics);
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
                cluster.addresses.add(server.expect("READY", BenchDriver.START_TIMEOUT_MILLIS));
            }
            if (replicas > 0) {
                // Members: each installs the routing table and replicas naming every server.
                cluster.sendAll(cluster.servers, "TABLE " + String.join(",", cluster.addresses));
                for (Child server : cluster.servers) {
                    server.expect("INSTALLED", BenchDriver.START_TIMEOUT_MILLIS);
                }
            }
            cluster.sendAll(cluster.workers, "SERVERS " + (inProcess ? "in-process" : String.join(",", cluster.addresses)));
            for (Child worker : cluster.workers) {
                worker.expect("READY", BenchDriver.START_TIMEOUT_MILLIS);
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
            String line = worker.expect("RESULT", BenchDriver.START_TIMEOUT_MILLIS);
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
            String line = server.expect("STATS", BenchDriver.START_TIMEOUT_MILLIS);
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
