package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Both benchmarks end to end for about a second per transport, with small tables: every
 * transport completes requests without errors, the figures are sane and the report is written.
 */
class BenchmarkSmokeTest {

    /**
     * The baseline and gRPC, plus shm for fetch: the whole suite stays under 30 s on 2 cores
     * (every transport of a run costs three JVM starts); tcp runs in the full benchmark.
     */
    private static final List<String> TRANSPORTS = List.of("netty", "grpc");

    private static void small(BenchOptions c, Path dir) {
        c.transports = TRANSPORTS;
        c.ids = 20_000;
        // One server: fewer JVMs to start on a small machine; routing over two is in PsServiceEquivalenceTest.
        c.servers = 1;
        c.warmupSeconds = 0.2;
        c.durationSeconds = 1;
        c.reportDir = dir;
        c.childJvmOptions = List.of("-Xms64m", "-Xmx512m", "-XX:TieredStopAtLevel=1");
    }

    @Test
    void fetch(@TempDir Path dir) throws Exception {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.common.transports = List.of("shm", "netty", "grpc");
        o.batchMax = 512;
        List<RunResult> results = FetchBenchmark.run(o, new PrintStream(new ByteArrayOutputStream(), true,
                StandardCharsets.UTF_8));
        check(results, "fetch", 3);
        for (RunResult r : results) {
            assertTrue(r.keys() >= 16 * r.operations() && r.keys() <= 512 * r.operations(), r.json());
        }
        Path report = Report.write(dir, "fetch", "test", results);
        for (String file : List.of("fetch.jsonl", "fetch.md", "fetch-cdf.png", "fetch-latency.png", "fetch-cpu.png")) {
            assertTrue(Files.size(report.resolve(file)) > 0, file);
        }
        assertEquals(results.size(), Files.readAllLines(report.resolve("fetch.jsonl")).size());
    }

    @Test
    void fetchInEveryPullFormatReportsItsBytes(@TempDir Path dir) {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.common.transports = List.of("netty", "grpc");
        o.pullFormats = List.of("f32", "f16", "int8");
        o.batch = 64;
        // Uniform over 20,000 ids: a batch of 64 repeats an id in one fetch of ten, so nearly every key is a row.
        o.distribution = "uniform";
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        List<RunResult> results = FetchBenchmark.run(o, new PrintStream(printed, true, StandardCharsets.UTF_8));
        check(results, "fetch", 4);
        assertEquals(List.of("netty", "netty-f16", "netty-int8", "grpc"), results.stream().map(RunResult::label).toList());
        double f32 = PullFormatReport.bytesPerFetch(results.get(0)) / 64;
        double f16 = PullFormatReport.bytesPerFetch(results.get(1)) / 64;
        double int8 = PullFormatReport.bytesPerFetch(results.get(2)) / 64;
        int d = o.common.dimension;
        // Per distinct key the answer carries a row: 4d, 2d and d + 4 bytes; the headers are the same in every format.
        assertTrue(f32 - f16 > 2 * d - 2 && f32 - f16 < 2 * d + 2, f32 + " vs " + f16 + " bytes per key");
        assertTrue(f32 - int8 > 3 * d - 4 - 2 && f32 - int8 < 3 * d - 4 + 2, f32 + " vs " + int8 + " bytes per key");
        assertTrue(printed.toString(StandardCharsets.UTF_8).contains("grpc-f16: skipped"));
        PullFormatReport.print(results, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
    }

    @Test
    void fetchWithTheTransportDefaultsAndHandlerThreads(@TempDir Path dir) {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.common.transports = List.of("shm", "netty");
        o.common.psTransport = "default";
        o.common.pullThreads = "handler";
        o.batchMin = 2048;
        o.batchMax = 4096;
        List<RunResult> results = FetchBenchmark.run(o, new PrintStream(new ByteArrayOutputStream(), true,
                StandardCharsets.UTF_8));
        check(results, "fetch", 2);
        // Responses of a few thousand rows exceed the default eager threshold.
        assertTrue(results.getFirst().counters().get("server_rendezvous_sent") > 0, results.getFirst().json());
    }

    @Test
    void push(@TempDir Path dir) {
        PushOptions o = new PushOptions();
        small(o.common, dir);
        o.workers = 4;
        o.batch = 256;
        o.flowControl = "on";
        ByteArrayOutputStream progress = new ByteArrayOutputStream();
        List<RunResult> results = PushBenchmark.run(o, new PrintStream(progress, true, StandardCharsets.UTF_8));
        check(results, "push", TRANSPORTS.size());
        String printed = progress.toString(StandardCharsets.UTF_8);
        for (RunResult r : results) {
            assertEquals(256L * r.operations(), r.keys(), r.json());
            assertTrue(r.steps().getTotalCount() > 0, r.json());
            assertTrue(r.counters().get("server_peak_queue_depth") >= 1, r.json());
            // The compilers' share of the measured CPU, and the note where it is above the threshold.
            long compilerMicros = r.counters().get("compiler_cpu_us");
            assertTrue(compilerMicros >= 0 && compilerMicros * 1_000 <= r.cpuNanos(), r.json());
            boolean noted = printed.contains("note: " + r.label() + ": the JIT compilers took");
            assertEquals(compilerMicros * 1_000 > BenchDriver.COMPILER_SHARE_NOTE * r.cpuNanos(), noted,
                    r.json() + "\n" + printed);
        }
    }

    @Test
    void theFloorAndTheLocalTransportInOneProcess(@TempDir Path dir) throws Exception {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.common.transports = List.of("direct", "local", "netty");
        o.common.servers = 2;
        // Long enough that a loaded machine still completes a few fetches in the measured interval.
        o.common.warmupSeconds = 1.0;
        o.common.durationSeconds = 3;
        o.batchMax = 512;
        List<RunResult> results = FetchBenchmark.run(o, new PrintStream(new ByteArrayOutputStream(), true,
                StandardCharsets.UTF_8));
        check(results, "fetch", 3);
        RunResult floor = Floor.of(results);
        assertEquals("direct", floor.transport());
        // The local run went through PsClient, RPC and PsServer: its servers' transports saw every pull.
        RunResult local = results.get(1);
        assertTrue(local.counters().get("server_messages_received") >= local.operations(), Report.json(results, local));
        for (RunResult r : results) {
            String json = Report.json(results, r);
            for (String key : List.of("\"floor_mean_us\":", "\"layer_mean_us\":", "\"layer_p99_us\":",
                    "\"layer_cpu_us_per_op\":", "\"layer_cpu_vs_netty\":")) {
                assertTrue(json.contains(key), key + " in " + json);
            }
        }
        assertTrue(Report.json(results, results.get(2)).contains("\"layer_cpu_vs_netty\":1.000"));
        List<String> table = Floor.table(results);
        assertEquals(2 + 2, table.size(), String.join("\n", table));
        Path report = Report.write(dir, "fetch", "test", results);
        for (String file : List.of("fetch-floor-mean.png", "fetch-floor-p99.png", "fetch-floor-cpu.png")) {
            assertTrue(Files.size(report.resolve(file)) > 0, file);
        }

        PushOptions p = new PushOptions();
        small(p.common, dir);
        p.common.transports = List.of("direct", "local");
        p.workers = 4;
        p.batch = 256;
        p.flowControl = "on";
        List<RunResult> pushes = PushBenchmark.run(p, new PrintStream(new ByteArrayOutputStream(), true,
                StandardCharsets.UTF_8));
        assertEquals(2, pushes.size());
        for (RunResult r : pushes) {
            assertEquals(0, r.errors(), r.json());
            assertEquals(256L * r.operations(), r.keys(), r.json());
            assertTrue(r.operations() > 5 && r.steps().getTotalCount() > 0, r.json());
        }
    }

    /**
     * {@code --interleave}: every transport's processes at once, each measured in its own slices;
     * the slices' time adds up to the duration, not the settling and pauses between them.
     */
    @Test
    void fetchInterleavedMeasuresEachTransportInItsOwnSlices(@TempDir Path dir) {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.common.transports = List.of("direct", "shm", "netty");
        o.common.warmupSeconds = 0.5;
        o.common.durationSeconds = 0.9;
        o.interleave = 0.3;
        o.batchMax = 512;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        List<RunResult> results = FetchBenchmark.run(o, new PrintStream(printed, true, StandardCharsets.UTF_8));
        String text = printed.toString(StandardCharsets.UTF_8);
        assertEquals(List.of("direct", "shm", "netty"), results.stream().map(RunResult::label).toList(), text);
        check(results, "fetch", 3);
        for (RunResult r : results) {
            // Three slices of 0.3 s; with the 0.25 s of settling and the pauses between them it would be 1.6 s or more.
            assertTrue(r.seconds() >= 0.85 && r.seconds() < 1.5, r.label() + " measured " + r.seconds() + " s");
            if (HostSteal.now() != null) {
                assertTrue(r.counters().containsKey(HostSteal.COUNTER), r.json());
            }
        }
        assertTrue(text.contains("cycle 3/3"), text);
    }

    /** A paused worker's threads stop (its processes use next to no CPU) and its measured time is its slices'. */
    @Test
    void aPausedWorkerStopsAndItsSlicesAddUp(@TempDir Path dir) throws Exception {
        FetchOptions o = new FetchOptions();
        small(o.common, dir);
        o.batchMax = 512;
        BenchDriver driver = new BenchDriver(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8));
        try (BenchCluster cluster = driver.startFetch(o, BenchTransport.parse("direct"), false,
                dev.ferry.ps.PullFormat.F32, 0)) {
            cluster.sendAll(cluster.workers, "RUN");
            Thread.sleep(1_000);
            long c0 = cluster.cpuNanos();
            Thread.sleep(1_000);
            long running = cluster.cpuNanos() - c0;
            BenchDriver.pause(cluster);
            long p0 = cluster.cpuNanos();
            Thread.sleep(1_000);
            long paused = cluster.cpuNanos() - p0;
            assertTrue(running > 300_000_000L && paused < running / 5, "CPU over a second: running "
                    + running / 1_000_000 + " ms, paused " + paused / 1_000_000 + " ms");
            for (int slice = 0; slice < 2; slice++) {
                cluster.sendAll(cluster.workers, "RESUME");
                cluster.sendAll(cluster.workers, "MEASURE");
                Thread.sleep(500);
                BenchDriver.pause(cluster);
                Thread.sleep(500);
            }
            cluster.sendAll(cluster.workers, "STOP");
            RunResult r = cluster.collect("fetch", BenchTransport.parse("direct"), true, cluster.workers, 1, null);
            assertEquals(0, r.errors(), r.json());
            assertTrue(r.operations() > 5, r.json());
            assertTrue(r.seconds() >= 0.95 && r.seconds() < 1.5, "two slices of 0.5 s measured as " + r.seconds() + " s");
        }
    }

    @Test
    void interleavingIsTheClosedLoopsOnly() {
        FetchOptions o = new FetchOptions();
        o.interleave = 1.0;
        o.check();
        o.interleave = 0.0;
        assertThrows(IllegalArgumentException.class, o::check);
        o.interleave = 11.0;
        assertThrows(IllegalArgumentException.class, o::check, "longer than --duration");
        o.interleave = 1.0;
        o.rate = 100;
        assertThrows(IllegalArgumentException.class, o::check);
        o.rate = 0;
        o.concurrency = 4;
        assertThrows(IllegalArgumentException.class, o::check);
        o.concurrency = null;
        o.pullFormats = List.of("f32", "f16");
        assertThrows(IllegalArgumentException.class, o::check);
    }

    /** {@code --replicas 1,2}: cluster members without and with a backup per group, one row each, in that order. */
    @Test
    void pushWithReplicas(@TempDir Path dir) {
        PushOptions o = new PushOptions();
        small(o.common, dir);
        o.common.transports = List.of("netty");
        o.common.servers = 2;
        o.common.replicas = List.of(1, 2);
        o.workers = 2;
        o.batch = 256;
        o.flowControl = "on";
        // Two seconds: at load 12-16 a replicated push here took about 1 s (the backup's round trip
        // on C1-compiled children), and this test checks what the rows hold, not how fast.
        o.common.durationSeconds = 2;
        List<RunResult> results = PushBenchmark.run(o, new PrintStream(new ByteArrayOutputStream(), true,
                StandardCharsets.UTF_8));
        assertEquals(List.of("netty r=1", "netty r=2"), results.stream().map(RunResult::label).toList());
        for (RunResult r : results) {
            assertEquals(0, r.errors(), r.json());
            assertTrue(r.operations() > 0 && r.steps().getTotalCount() > 0, r.json());
            assertEquals(256L * r.operations(), r.keys(), r.json());
        }
    }

    @Test
    void replicasNeedFerryTransportsAndEnoughServers() {
        BenchOptions c = new BenchOptions();
        c.servers = 2;
        c.transports = List.of("tcp");
        c.replicas = List.of(3);
        assertThrows(IllegalArgumentException.class, c::check);
        c.replicas = List.of(1, 2);
        c.check();
        c.transports = List.of("grpc");
        assertThrows(IllegalArgumentException.class, c::check);
        c.transports = List.of("local");
        assertThrows(IllegalArgumentException.class, c::check);
    }

    private static void check(List<RunResult> results, String workload, int transports) {
        assertEquals(transports, results.size());
        for (RunResult r : results) {
            String json = r.json();
            assertEquals(0, r.errors(), json);
            assertTrue(r.operations() > 5, json);
            assertTrue(r.meanMicros() > 0 && r.percentileMicros(50) <= r.percentileMicros(99)
                    && r.percentileMicros(99) <= r.percentileMicros(99.9), json);
            assertTrue(r.cpuMicrosPerOp() > 0, json);
            for (String key : List.of("\"workload\":\"" + workload + "\"", "\"transport\":", "\"mean_us\":",
                    "\"p50_us\":", "\"p99_us\":", "\"p999_us\":", "\"ops_per_s\":", "\"cpu_us_per_op\":")) {
                assertTrue(json.contains(key), key + " in " + json);
            }
        }
        List<String> table = Report.table(results);
        assertEquals(results.size() + 2, table.size());
        assertTrue(table.stream().anyMatch(l -> l.startsWith("| netty") && l.contains("1.00x")), String.join("\n", table));
    }
}
