package dev.ferry.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;

import dev.ferry.bench.stream.StreamBenchmark;
import dev.ferry.bench.stream.StreamResult;
import dev.ferry.bench.stream.StreamSpec;
import dev.ferry.bench.stream.StreamSweep;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;
import picocli.CommandLine.TypeConversionException;

/** {@code ferry bench stream}: one-way throughput and per-message latency between two processes. */
@Command(name = "stream",
        mixinStandardHelpOptions = true,
        description = {
            "A one-way stream of messages of one size from this process to a server child on 127.0.0.1, with a "
                    + "fixed number in flight: messages/s, MiB/s, latency from send to its completion (mean, p50, "
                    + "p99, p99.9 in us) and the flow-control counters of both sides.",
            "By default through Ferry's transport API (credits, send window, eager and rendezvous); --raw streams on "
                    + "the raw libfabric binding instead, the ceiling; --sweep runs both over 64 B .. 16 MiB and "
                    + "prints their ratios; --pingpong measures round trips through the transport API."},
        footer = {"", "Examples:",
                "  ferry bench stream --provider shm --size 64 --seconds 3",
                "  ferry bench stream --provider tcp --size 1m --raw --json",
                "  ferry bench stream --provider shm --sweep --runs 3",
                "  ferry bench stream --provider netty --size 4k --pingpong"})
public final class StreamCommand implements Callable<Integer> {

    @Spec
    private CommandSpec spec;

    @Option(names = {"-p", "--provider", "--transport"}, paramLabel = "<name>", defaultValue = "shm",
            description = "shm, tcp (libfabric providers; a /msg or /rdm suffix forces the endpoint type) or netty "
                    + "(kernel TCP through the transport API). Default: ${DEFAULT-VALUE}.")
    private String provider;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "64", converter = Size.class,
            description = "Message size, such as 64, 4k, 1m, 16m. Default: ${DEFAULT-VALUE}.")
    private int size;

    @Option(names = {"-n", "--messages"}, paramLabel = "<n>",
            description = "Timed messages (instead of --seconds).")
    private Long messages;

    @Option(names = {"-t", "--seconds"}, paramLabel = "<s>",
            description = "Timed duration. Default: 3 (1.5 per point with --sweep).")
    private Double seconds;

    @Option(names = "--warmup", paramLabel = "<s>",
            description = "Untimed streaming first, for the JIT and the pools. Default: 1 (0.5 with --sweep).")
    private Double warmup;

    @Option(names = {"-w", "--window"}, paramLabel = "<n>", defaultValue = "0",
            description = "Messages in flight at most; 0 picks 64, fewer for large messages (64 MiB in flight at "
                    + "most, 2 at least). Default: ${DEFAULT-VALUE}.")
    private int window;

    @Option(names = "--streams", paramLabel = "<n>", defaultValue = "1",
            description = "Transport streams used round-robin (they spread over the peer's links). "
                    + "Default: ${DEFAULT-VALUE}.")
    private int streams;

    @Option(names = "--raw", description = "Stream on the raw libfabric binding instead of the transport API.")
    private boolean raw;

    @Option(names = "--pingpong", description = "Round trips through the transport API instead of a one-way stream.")
    private boolean pingPong;

    @Option(names = "--sweep", description = "Run 64 B, 4 KiB, 64 KiB, 1 MiB and 16 MiB, transport API and raw "
            + "binding in turn, and print a table of their ratios.")
    private boolean sweep;

    @Option(names = "--sizes", paramLabel = "<bytes>", split = ",", converter = Size.class,
            description = "Sizes for --sweep instead of the five above.")
    private List<Integer> sizes;

    @Option(names = "--runs", paramLabel = "<n>", defaultValue = "1",
            description = "Runs per point and side with --sweep (the best counts), or repeated runs otherwise. "
                    + "Default: ${DEFAULT-VALUE}.")
    private int runs;

    @Option(names = "--json", description = "Also print each result as one JSON object on one line.")
    private boolean json;

    @Option(names = "--timeout-ms", paramLabel = "<ms>", defaultValue = "10000",
            description = "Longest wait for the server to start or for any one completion. Default: ${DEFAULT-VALUE}.")
    private long timeoutMillis;

    @Option(names = "--server-jvm-option", paramLabel = "<option>",
            description = "An option for the server child's JVM, such as -XX:StartFlightRecording=filename=server.jfr "
                    + "(repeatable; also FERRY_STREAM_SERVER_OPTS).")
    private List<String> serverJvmOptions = new ArrayList<>();

    @Override
    public Integer call() {
        StreamSpec base = spec();
        PrintWriter out = spec.commandLine().getOut();
        if (sweep) {
            StreamSweep.run(base, sizes == null || sizes.isEmpty() ? StreamSweep.SIZES : sizes, runs, out, json);
            return 0;
        }
        StreamResult best = null;
        for (int run = 1; run <= runs; run++) {
            StreamResult result = StreamBenchmark.run(base);
            out.println(result.text());
            if (json) {
                out.println(result.json());
            }
            out.flush();
            best = best == null || result.messagesPerSecond() > best.messagesPerSecond() ? result : best;
        }
        if (runs > 1) {
            out.printf(Locale.ROOT, "best of %d: %,.0f msg/s, %.1f MiB/s, p50 %.2f us, p99 %.2f us%n", runs,
                    best.messagesPerSecond(), best.mebibytesPerSecond(), best.p50Us(), best.p99Us());
            out.flush();
        }
        return 0;
    }

    private StreamSpec spec() {
        try {
            if (messages != null && seconds != null) {
                throw new IllegalArgumentException("give --messages or --seconds, not both");
            }
            if (runs <= 0) {
                throw new IllegalArgumentException("runs must be positive: " + runs);
            }
            if (sweep && (raw || pingPong)) {
                throw new IllegalArgumentException("--sweep runs the transport and the raw binding itself; "
                        + "drop --raw and --pingpong");
            }
            double timed = seconds != null ? seconds : sweep ? 1.5 : 3.0;
            double warm = warmup != null ? warmup : sweep ? 0.5 : 1.0;
            return StreamSpec.of(provider, size)
                    .withImplementation(raw ? StreamSpec.Implementation.RAW : StreamSpec.Implementation.TRANSPORT)
                    .withMode(pingPong ? StreamSpec.Mode.PINGPONG : StreamSpec.Mode.STREAM)
                    .withSeconds(timed, warm)
                    .withMessages(messages == null ? 0 : messages)
                    .withWindow(window, streams)
                    .withServer(timeoutMillis, serverJvmOptions);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
    }

    /** A byte count such as {@code 64}, {@code 4k}, {@code 4KiB}, {@code 1m} (binary multiples). */
    static final class Size implements ITypeConverter<Integer> {
        @Override
        public Integer convert(String value) {
            String v = value.trim().toLowerCase(Locale.ROOT);
            long unit = 1;
            for (String[] suffix : new String[][] {{"kib", "1024"}, {"mib", "1048576"}, {"k", "1024"},
                {"m", "1048576"}, {"b", "1"}}) {
                if (v.endsWith(suffix[0])) {
                    unit = Long.parseLong(suffix[1]);
                    v = v.substring(0, v.length() - suffix[0].length()).trim();
                    break;
                }
            }
            long bytes;
            try {
                bytes = Math.multiplyExact(Long.parseLong(v), unit);
            } catch (NumberFormatException | ArithmeticException e) {
                throw new TypeConversionException("'" + value + "' is not a byte count (such as 64, 4k, 1m)");
            }
            if (bytes < 0 || bytes > StreamSpec.MAX_SIZE) {
                throw new TypeConversionException("size " + value + " is outside 0.." + StreamSpec.MAX_SIZE + " bytes");
            }
            return (int) bytes;
        }
    }

    /** Runs this command alone: {@code java -cp ... dev.ferry.cli.StreamCommand --provider shm --size 64}. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new StreamCommand()).execute(args));
    }
}
