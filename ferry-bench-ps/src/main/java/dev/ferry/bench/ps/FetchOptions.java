package dev.ferry.bench.ps;

import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** Options of {@code bench fetch}; a picocli mixin whose field initial values are the defaults. */
public class FetchOptions {

    @Mixin
    public BenchOptions common = new BenchOptions();

    @Option(names = "--clients", paramLabel = "<n>",
            description = "Client threads, spread over --client-processes. Default: 4.")
    public int clients = 4;

    @Option(names = "--client-processes", paramLabel = "<n>", description = "Client processes. Default: 1.")
    public int clientProcesses = 1;

    @Option(names = "--distribution", paramLabel = "<d>", description = "Ids: zipf or uniform. Default: zipf.")
    public String distribution = "zipf";

    @Option(names = "--batch-min", paramLabel = "<n>", description = "Smallest batch, in ids. Default: 16.")
    public int batchMin = 16;

    @Option(names = "--batch-max", paramLabel = "<n>",
            description = "Largest batch; sizes are log-uniform in [min, max]. Default: 4096.")
    public int batchMax = 4096;

    @Option(names = "--batch", paramLabel = "<n>", description = "A fixed batch size (sets min and max).")
    public Integer batch;

    @Option(names = "--concurrency", paramLabel = "<n>",
            description = "Requests outstanding per client thread (closed loop), or at most (open loop). "
                    + "Default: 1 closed, 64 open.")
    public Integer concurrency;

    @Option(names = "--rate", paramLabel = "<ops/s>",
            description = "Open loop: requests per second over all clients, latency from each request's "
                    + "intended send time. Default: 0, closed loop.")
    public double rate;

    @Option(names = "--pull-format", paramLabel = "<f>", split = ",",
            description = "Formats of the pulled rows, each run in turn on every Ferry transport: f32, f16, bf16, "
                    + "int8 (comma-separated). gRPC and direct run f32 only. Default: f32.")
    public java.util.List<String> pullFormats = java.util.List.of("f32");

    @Option(names = "--interleave", paramLabel = "<s>",
            description = "Run every transport's processes at once and measure them in turn, <s> seconds each, cycle "
                    + "after cycle, until each has --duration seconds (each waits, paused, while another is measured): "
                    + "a host whose speed drifts over minutes then slows every row alike. The closed loop on loopback "
                    + "only (no --rate, --concurrency, --replicas, --metrics-rounds, other pull formats). Default: off, "
                    + "each transport measured once, after the one before.")
    public Double interleave;

    /** The pull formats, parsed. */
    java.util.List<dev.ferry.ps.PullFormat> formats() {
        return pullFormats.stream().map(dev.ferry.ps.PullFormat::parse).distinct().toList();
    }

    /** Default warm-up: long, since fetch latency is what is measured and gRPC's JIT settles last. */
    static final double WARMUP_SECONDS = 25;

    int minBatch() {
        return batch != null ? batch : batchMin;
    }

    int maxBatch() {
        return batch != null ? batch : batchMax;
    }

    int concurrencyPerThread() {
        return concurrency != null ? concurrency : rate > 0 ? 64 : 1;
    }

    double alpha() {
        return switch (distribution) {
            case "zipf" -> common.zipfAlpha;
            case "uniform" -> 0;
            default -> throw new IllegalArgumentException("--distribution is zipf or uniform: " + distribution);
        };
    }

    void check() {
        common.check();
        alpha();
        try {
            formats();
        } catch (dev.ferry.ps.PsException e) {
            throw new IllegalArgumentException("--pull-format: " + e.getMessage());
        }
        if (interleave != null) {
            if (!(interleave > 0) || interleave > common.durationSeconds) {
                throw new IllegalArgumentException("--interleave takes seconds in (0, --duration]: " + interleave);
            }
            if (rate > 0 || concurrencyPerThread() != 1 || !common.replicas.isEmpty() || common.metricsRounds > 0
                    || common.netlab() || !formats().equals(java.util.List.of(dev.ferry.ps.PullFormat.F32))) {
                throw new IllegalArgumentException("--interleave runs the closed loop of one fetch per thread on "
                        + "loopback, f32 pulls, a fixed cluster: not with --rate, --concurrency, --replicas, "
                        + "--metrics-rounds, --network netlab or other pull formats");
            }
        }
        if (clients < 1 || clientProcesses < 1 || clientProcesses > clients || minBatch() < 1
                || maxBatch() < minBatch() || concurrencyPerThread() < 1 || rate < 0) {
            throw new IllegalArgumentException("need 1 <= --client-processes <= --clients, 1 <= batch min <= max, "
                    + "--concurrency >= 1, --rate >= 0");
        }
    }
}
