package dev.ferry.bench.ps;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.LocalCluster;
import dev.ferry.ps.net.PsClient;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * The parameter-server demo ({@code bin/ferry demo}): for Ferry over libfabric shm and for the
 * Netty kernel-TCP baseline, a local cluster of server processes serves one embedding table
 * (dimension 64, Adagrad) while a few concurrent callers run an inference workload (pulls) and
 * a training workload (pushes) of Zipf-distributed ids in log-uniform batch sizes, as in the
 * paper's fetch and push experiments. A progress line goes to standard error every second; a
 * table of HdrHistogram latencies and rates goes to standard output at the end.
 */
public final class PsDemo {

    /** Whether standard error is a terminal (progress rewrites one line) or a pipe (plain lines). */
    private static final boolean TERMINAL = System.console() != null && System.console().isTerminal();
    /** The slices in which a workload's rate is taken while it settles. */
    private static final long SETTLE_SLICE_MILLIS = 1_000;

    /**
     * What the demo runs.
     *
     * @param transports   transports to measure, each {@code label=provider}
     * @param servers      server processes per cluster
     * @param callers      concurrent calling threads
     * @param idSpace      ids are Zipf ranks in {@code [0, idSpace)}
     * @param zipfExponent skew of the ids; 1.09 is a typical recommendation-feature skew
     * @param minBatch     smallest batch, in ids
     * @param maxBatch     largest batch, in ids; sizes are log-uniform in between
     * @param dimension    floats per embedding row
     * @param warmupMillis untimed mixed traffic before the timed phases, per transport
     * @param phaseMillis  length of each timed phase (fetch, then push)
     * @param settleMillis before each timed phase, its workload runs untimed in 1 s slices until
     *                     its calls per second have settled ({@link ThroughputSettle}), at most this
     *                     long; 0 times each phase right after the mixed warm-up
     */
    public record Settings(List<String> transports, int servers, int callers, int idSpace, double zipfExponent,
            int minBatch, int maxBatch, int dimension, long warmupMillis, long phaseMillis, long settleMillis) {

        /** Two transports, 2 s of mixed warm-up, and each 9-second phase after its workload settled (20 s at most). */
        public static Settings defaults() {
            return new Settings(List.of("Ferry-shm=shm", "Netty-TCP=netty"), 2, 4, 1 << 20, 1.09, 16, 4096, 64,
                    2_000, 9_000, 20_000);
        }

        /** These settings on other transports ({@code label=provider}). */
        public Settings withTransports(List<String> value) {
            return new Settings(List.copyOf(value), servers, callers, idSpace, zipfExponent, minBatch, maxBatch,
                    dimension, warmupMillis, phaseMillis, settleMillis);
        }

        /** These settings with another server count. */
        public Settings withServers(int value) {
            return new Settings(transports, value, callers, idSpace, zipfExponent, minBatch, maxBatch, dimension,
                    warmupMillis, phaseMillis, settleMillis);
        }

        /** These settings with another id space (and table size). */
        public Settings withIdSpace(int value) {
            return new Settings(transports, servers, callers, value, zipfExponent, minBatch, maxBatch, dimension,
                    warmupMillis, phaseMillis, settleMillis);
        }

        /** These settings with other phase lengths. */
        public Settings withTimes(long warmup, long phase) {
            return new Settings(transports, servers, callers, idSpace, zipfExponent, minBatch, maxBatch, dimension,
                    warmup, phase, settleMillis);
        }

        /** These settings with another longest settling time per phase (0: none). */
        public Settings withSettle(long value) {
            if (value < 0) {
                throw new IllegalArgumentException("settling time must be >= 0 ms: " + value);
            }
            return new Settings(transports, servers, callers, idSpace, zipfExponent, minBatch, maxBatch, dimension,
                    warmupMillis, phaseMillis, value);
        }
    }

    /** One line of the table. */
    public record Row(String transport, String workload, long ops, long keys, double seconds, double meanUs,
            double p50Us, double p99Us, String skipped) {

        public double opsPerSecond() {
            return ops / seconds;
        }

        public double keysPerSecond() {
            return keys / seconds;
        }
    }

    private PsDemo() {
    }

    public static void main(String[] args) {
        Settings settings = Settings.defaults();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--phase-ms") && i + 1 < args.length) {
                settings = settings.withTimes(settings.warmupMillis(), Long.parseLong(args[++i]));
            } else if (args[i].equals("--transports") && i + 1 < args.length) {
                settings = settings.withTransports(List.of(args[++i].split(",")));
            } else if (args[i].equals("--warmup-ms") && i + 1 < args.length) {
                settings = settings.withTimes(Long.parseLong(args[++i]), settings.phaseMillis());
            } else if (args[i].equals("--settle-ms") && i + 1 < args.length) {
                settings = settings.withSettle(Long.parseLong(args[++i]));
            } else {
                System.err.println("usage: PsDemo [--warmup-ms n] [--settle-ms n] [--phase-ms n] [--transports Label=provider,...]");
                System.exit(2);
            }
        }
        PrintWriter out = new PrintWriter(System.out, true);
        PrintWriter err = new PrintWriter(System.err, true);
        System.exit(run(settings, out, err));
    }

    /** Runs the demo and prints the table; returns the exit status (0, or 1 if every transport failed). */
    public static int run(Settings settings, PrintWriter out, PrintWriter err) {
        List<Row> rows = new ArrayList<>();
        long started = System.nanoTime();
        for (String entry : settings.transports()) {
            String label = entry.contains("=") ? entry.substring(0, entry.indexOf('=')) : entry;
            String provider = entry.contains("=") ? entry.substring(entry.indexOf('=') + 1) : entry;
            try {
                rows.addAll(runTransport(settings, label, provider, err));
            } catch (RuntimeException e) {
                String reason = e.getMessage() == null ? e.toString() : e.getMessage().replace('\n', ' ');
                err.printf(Locale.ROOT, "%nferry demo: %s skipped: %s%n", label, reason);
                rows.add(new Row(label, "fetch", 0, 0, 1, 0, 0, 0, reason));
                rows.add(new Row(label, "push", 0, 0, 1, 0, 0, 0, reason));
            }
        }
        err.printf(Locale.ROOT, "%nferry demo: done in %.1f s%n", (System.nanoTime() - started) / 1e9);
        print(settings, rows, out);
        return rows.stream().allMatch(r -> r.skipped() != null) ? 1 : 0;
    }

    private static List<Row> runTransport(Settings settings, String label, String provider, PrintWriter err) {
        err.printf(Locale.ROOT, "ferry demo: %s: starting %d server processes...%n", label, settings.servers());
        try (LocalCluster cluster = LocalCluster.start(settings.servers(), provider, null,
                List.of("-Xmx512m"));
                PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
            return measure(settings, client, label, err);
        }
    }

    /**
     * Creates the demo's table through {@code client} (any cluster: fixed, or run by a
     * controller) and runs the warm-up, the fetch phase and the push phase on it, with progress
     * lines on {@code err}; returns the fetch and the push row.
     */
    public static List<Row> measure(Settings settings, PsClient client, String label, PrintWriter err) {
        client.createTable(TableConfig.of("embeddings", settings.dimension(), Optimizer.adagrad(0.05))
                .withInitializer(Initializer.uniform(-0.01, 0.01, 42)).withMaxRows(settings.idSpace()));
        run(settings, client, label, "warm-up", settings.warmupMillis(), null, err);
        List<Row> rows = new ArrayList<>();
        settle(settings, client, label, "fetch", Boolean.FALSE, err);
        rows.add(run(settings, client, label, "fetch", settings.phaseMillis(), Boolean.FALSE, err));
        settle(settings, client, label, "push", Boolean.TRUE, err);
        rows.add(run(settings, client, label, "push", settings.phaseMillis(), Boolean.TRUE, err));
        return rows;
    }

    /**
     * Runs one workload untimed in 1 s slices until its calls per second have settled, or for
     * {@link Settings#settleMillis} at most, with a line per slice.
     */
    private static void settle(Settings settings, PsClient client, String label, String workload, Boolean push,
            PrintWriter err) {
        ThroughputSettle settled = new ThroughputSettle();
        long start = System.nanoTime();
        long until = start + TimeUnit.MILLISECONDS.toNanos(settings.settleMillis());
        while (System.nanoTime() - until < 0) {
            long slice = Math.min(SETTLE_SLICE_MILLIS, Math.max(1, TimeUnit.NANOSECONDS.toMillis(until - System.nanoTime())));
            Row r = run(settings, client, label, "settle " + workload, slice, push, null);
            boolean done = settled.add(r.opsPerSecond());
            err.printf(Locale.ROOT, "ferry demo: %-10s settle %-5s %4.0f s  %,9.0f calls/s%s%n", label, workload,
                    (System.nanoTime() - start) / 1e9, r.opsPerSecond(), done ? "  settled" : "");
            err.flush();
            if (done) {
                return;
            }
        }
        if (settings.settleMillis() > 0) {
            err.printf(Locale.ROOT, "ferry demo: %-10s %s did not settle within %,d ms: timed as it is%n", label,
                    workload, settings.settleMillis());
        }
    }

    /** One phase: {@code push} true pushes, false pulls, null alternates (warm-up); {@code err} null prints no progress. */
    private static Row run(Settings settings, PsClient client, String label, String phase, long millis, Boolean push,
            PrintWriter err) {
        Recorder recorder = new Recorder(3);
        LongAdder ops = new LongAdder();
        LongAdder keys = new LongAdder();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long start = System.nanoTime();
        long end = start + TimeUnit.MILLISECONDS.toNanos(millis);
        List<Thread> callers = new ArrayList<>();
        for (int c = 0; c < settings.callers(); c++) {
            long seed = 1_000L * c + phase.hashCode();
            callers.add(Thread.ofPlatform().name("ferry-demo-caller-" + c).start(() -> {
                try {
                    call(settings, client, push, seed, end, recorder, ops, keys);
                } catch (RuntimeException e) {
                    failure.compareAndSet(null, e);
                }
            }));
        }
        Histogram total = new Histogram(3);
        long nextReport = start + TimeUnit.SECONDS.toNanos(1);
        for (Thread t : callers) {
            while (t.isAlive()) {
                try {
                    t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(nextReport - System.nanoTime())));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted");
                }
                if (System.nanoTime() - nextReport >= 0) {
                    total.add(recorder.getIntervalHistogram());
                    nextReport += TimeUnit.SECONDS.toNanos(1);
                    if (err == null) {
                        continue;
                    }
                    // A terminal gets one line rewritten in place; a pipe or a file gets plain lines.
                    err.printf(Locale.ROOT, (TERMINAL ? "\r" : "")
                            + "ferry demo: %-10s %-8s %5.1f s  ops %,9d  keys %,12d  p99 %,9.0f us" + (TERMINAL ? "   " : "%n"),
                            label, phase, (System.nanoTime() - start) / 1e9, ops.sum(), keys.sum(),
                            total.getValueAtPercentile(99) / 1e3);
                    err.flush();
                }
            }
        }
        total.add(recorder.getIntervalHistogram());
        if (TERMINAL && err != null) {
            err.println();
        }
        if (failure.get() != null) {
            throw new IllegalStateException(phase + " failed: " + failure.get().getMessage(), failure.get());
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        return new Row(label, phase, ops.sum(), keys.sum(), seconds, total.getMean() / 1e3,
                total.getValueAtPercentile(50) / 1e3, total.getValueAtPercentile(99) / 1e3, null);
    }

    private static void call(Settings settings, PsClient client, Boolean push, long seed, long end, Recorder recorder,
            LongAdder ops, LongAdder keys) {
        SplittableRandom random = new SplittableRandom(seed);
        ZipfSampler zipf = new ZipfSampler(settings.idSpace(), settings.zipfExponent());
        int d = settings.dimension();
        float[] rows = new float[settings.maxBatch() * d];
        double logMin = Math.log(settings.minBatch());
        double logMax = Math.log(settings.maxBatch() + 1);
        boolean pushing = false;
        while (System.nanoTime() - end < 0) {
            int batch = Math.min(settings.maxBatch(), (int) Math.exp(logMin + random.nextDouble() * (logMax - logMin)));
            long[] ids = new long[batch];
            for (int i = 0; i < batch; i++) {
                ids[i] = zipf.sample(random) - 1;
            }
            pushing = push == null ? !pushing : push;
            float[] grads = null;
            if (pushing) {
                grads = new float[batch * d];
                for (int i = 0; i < grads.length; i++) {
                    grads[i] = (float) (random.nextDouble() - 0.5) * 0.02f;
                }
            }
            long t0 = System.nanoTime();
            if (pushing) {
                client.push("embeddings", ids, grads);
            } else {
                client.pullAsync("embeddings", ids, rows).join();
            }
            recorder.recordValue(System.nanoTime() - t0);
            ops.increment();
            keys.add(batch);
        }
    }

    /** Prints the table of {@code rows} (and, for two transports, one against the other) to {@code out}. */
    public static void print(Settings settings, List<Row> rows, PrintWriter out) {
        out.printf(Locale.ROOT, "Parameter server on 127.0.0.1: %d server processes, %d callers, table dim %d "
                + "(Adagrad), Zipf %.2f ids over %,d, batches %d..%d ids (log-uniform), %.1f s per workload%n",
                settings.servers(), settings.callers(), settings.dimension(), settings.zipfExponent(),
                settings.idSpace(), settings.minBatch(), settings.maxBatch(), settings.phaseMillis() / 1000.0);
        out.printf(Locale.ROOT, "%-10s %-9s %10s %10s %10s %10s %12s%n", "transport", "workload", "mean us", "p50 us",
                "p99 us", "ops/s", "keys/s");
        for (Row r : rows) {
            if (r.skipped() != null) {
                out.printf(Locale.ROOT, "%-10s %-9s   skipped: %s%n", r.transport(), label(r.workload()), r.skipped());
            } else {
                out.printf(Locale.ROOT, "%-10s %-9s %10.0f %10.0f %10.0f %10.0f %12.0f%n", r.transport(),
                        label(r.workload()), r.meanUs(), r.p50Us(), r.p99Us(), r.opsPerSecond(), r.keysPerSecond());
            }
        }
        for (String workload : List.of("fetch", "push")) {
            List<Row> measured = rows.stream().filter(r -> r.workload().equals(workload) && r.skipped() == null).toList();
            if (measured.size() == 2) {
                Row a = measured.get(0);
                Row b = measured.get(1);
                out.printf(Locale.ROOT, "%s vs %s, %s: mean %+.1f%%, p99 %+.1f%%, ops/s %+.1f%%%n", a.transport(),
                        b.transport(), label(workload), 100 * (a.meanUs() / b.meanUs() - 1),
                        100 * (a.p99Us() / b.p99Us() - 1), 100 * (a.opsPerSecond() / b.opsPerSecond() - 1));
            }
        }
        out.flush();
    }

    private static String label(String workload) {
        return workload.equals("fetch") ? "fetch" : "push";
    }
}
