package dev.ferry.bench.ps;

import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** Options of {@code bench push}; a picocli mixin whose field initial values are the defaults. */
public class PushOptions {

    @Mixin
    public BenchOptions common = new BenchOptions();

    @Option(names = "--workers", paramLabel = "<n>",
            description = "Training workers (threads), spread over --worker-processes; all push in the same step "
                    + "into the --servers: a workers:1 incast per server. Default: 16.")
    public int workers = 16;

    @Option(names = "--worker-processes", paramLabel = "<n>", description = "Worker processes. Default: 2.")
    public int workerProcesses = 2;

    @Option(names = "--batch", paramLabel = "<n>",
            description = "Ids per gradient batch (each with --dimension floats). Default: 4096.")
    public int batch = 4096;

    @Option(names = "--distribution", paramLabel = "<d>",
            description = "Ids: uniform or zipf (zipf batches repeat ids, which are summed before sending). "
                    + "Default: uniform.")
    public String distribution = "uniform";

    @Option(names = "--flow-control", paramLabel = "<on|off|both>",
            description = "Ferry's send windows and receive credits: on (defaults), off (windows and credits so "
                    + "large they never bind), or both, one run each. gRPC runs once. Default: both.")
    public String flowControl = "both";

    /** Default warm-up: shorter than fetch's, so that seven runs (flow control both) fit in 5 minutes. */
    static final double WARMUP_SECONDS = 15;

    double alpha() {
        return switch (distribution) {
            case "zipf" -> common.zipfAlpha;
            case "uniform" -> 0;
            default -> throw new IllegalArgumentException("--distribution is zipf or uniform: " + distribution);
        };
    }

    boolean[] flowControlModes() {
        return switch (flowControl) {
            case "on" -> new boolean[] {true};
            case "off" -> new boolean[] {false};
            case "both" -> new boolean[] {true, false};
            default -> throw new IllegalArgumentException("--flow-control is on, off or both: " + flowControl);
        };
    }

    void check() {
        common.check();
        alpha();
        flowControlModes();
        if (workers < 1 || workerProcesses < 1 || workerProcesses > workers || batch < 1) {
            throw new IllegalArgumentException("need 1 <= --worker-processes <= --workers and --batch >= 1");
        }
    }
}
