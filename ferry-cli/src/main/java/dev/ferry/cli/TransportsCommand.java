package dev.ferry.cli;

import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.bench.pingpong.PingPongResult;
import dev.ferry.bench.pingpong.PingPongSpec;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code ferry bench transports}: the ping-pong on every transport this machine has, small and
 * page-sized messages, in one table.
 */
@Command(name = "transports",
        mixinStandardHelpOptions = true,
        description = {"Runs the ping-pong on every transport here (shm rdm, tcp msg, tcp rdm over libfabric; "
                + "netty over kernel TCP) at 64 B and 4 KiB and prints one table. Transports missing on this "
                + "machine are reported as skipped, with the reason."})
final class TransportsCommand implements Callable<Integer> {

    /** Whether standard error is a terminal (progress rewrites one line) or a pipe (plain lines). */
    private static final boolean TERMINAL = System.console() != null && System.console().isTerminal();

    /** The transports of the demo, libfabric ones as provider and endpoint type. */
    private static final String[][] TRANSPORTS = {{"shm", "rdm"}, {"tcp", "msg"}, {"tcp", "rdm"}, {"netty", null}};
    private static final int[] SIZES = {64, 4096};

    @Spec
    private CommandSpec spec;

    @Option(names = {"-n", "--iterations"}, paramLabel = "<n>", defaultValue = "2000",
            description = "Timed round trips per case. Default: ${DEFAULT-VALUE}.")
    private int iterations;

    @Option(names = {"-w", "--warmup"}, paramLabel = "<n>", defaultValue = "1000",
            description = "Untimed round trips first, at least, per case. Default: ${DEFAULT-VALUE}.")
    private int warmup;

    @Option(names = "--warmup-ms", paramLabel = "<ms>", defaultValue = "300",
            description = "How long each warm-up lasts at least. Default: ${DEFAULT-VALUE}.")
    private long warmupMillis;

    /** One line of the table: a result, or why the case was skipped. */
    private record Row(PingPongSpec spec, PingPongResult result, String skipped) {
    }

    @Override
    public Integer call() {
        List<PingPongSpec> cases = new ArrayList<>();
        try {
            for (String[] transport : TRANSPORTS) {
                for (int size : SIZES) {
                    cases.add(PingPongSpec.of(transport[0], transport[1], size, iterations, warmup)
                            .withWarmupMillis(warmupMillis));
                }
            }
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
        PrintWriter err = spec.commandLine().getErr();
        PingPong pingPong = PingPongCommand.newPingPong();
        List<Row> rows = new ArrayList<>();
        String skippedTransport = null;
        String skippedReason = null;
        long started = System.nanoTime();
        for (int i = 0; i < cases.size(); i++) {
            PingPongSpec c = cases.get(i);
            String transport = c.provider() + " " + c.endpointName();
            // A terminal gets one line rewritten in place; a pipe or a file gets plain lines.
            err.printf(Locale.ROOT, TERMINAL ? "\rferry bench transports: [%d/%d] %-24s" : "ferry bench transports: [%d/%d] %s%n",
                    i + 1, cases.size(), c.label());
            err.flush();
            if (transport.equals(skippedTransport)) {
                rows.add(new Row(c, null, skippedReason));
                continue;
            }
            try {
                rows.add(new Row(c, pingPong.run(c), null));
            } catch (RuntimeException e) {
                // A transport that is not there fails the same way at every size: ask once.
                skippedTransport = transport;
                skippedReason = FerryCommand.message(e);
                rows.add(new Row(c, null, skippedReason));
            }
        }
        err.printf(Locale.ROOT, (TERMINAL ? "\r" : "") + "ferry bench transports: %d cases in %.1f s%-20s%n",
                cases.size(), (System.nanoTime() - started) / 1e9, "");
        err.flush();
        print(rows);
        return 0;
    }

    private void print(List<Row> rows) {
        PrintWriter out = spec.commandLine().getOut();
        out.printf(Locale.ROOT, "Ping-pong round trips on 127.0.0.1, %d timed after %d ms of warm-up each "
                + "(microseconds)%n", iterations, warmupMillis);
        out.printf(Locale.ROOT, "%-9s %-9s %7s %9s %9s %9s %9s%n", "provider", "endpoint", "size", "mean", "p50",
                "p99", "p99.9");
        for (Row row : rows) {
            PingPongSpec s = row.spec();
            String size = s.size() >= 1024 && s.size() % 1024 == 0 ? s.size() / 1024 + " KiB" : s.size() + " B";
            if (row.result() == null) {
                out.printf(Locale.ROOT, "%-9s %-9s %7s   skipped: %s%n", s.provider(), s.endpointName(), size,
                        row.skipped());
            } else {
                PingPongResult r = row.result();
                out.printf(Locale.ROOT, "%-9s %-9s %7s %9.2f %9.2f %9.2f %9.2f%n", s.provider(), s.endpointName(), size,
                        r.meanUs(), r.p50Us(), r.p99Us(), r.p999Us());
            }
        }
        out.flush();
    }
}
