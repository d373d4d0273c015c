package dev.ferry.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

import dev.ferry.metrics.stat.Scraper;
import dev.ferry.metrics.stat.ServerStat;
import dev.ferry.metrics.stat.StatView;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code ferry stat}: a live view of servers (and benchmark processes) from their metrics
 * endpoints, redrawn every interval like {@code top}; {@code --once --json} for scripts.
 */
@Command(name = "stat",
        mixinStandardHelpOptions = true,
        description = {"A live view of Ferry processes from their metrics endpoints (ferry server --metrics-port): "
                + "ops/s and p50/p99 per method, links, credits, stalls, bytes in flight, registered memory, "
                + "rows per table, traffic per transport and fallback state.",
                "Exits 0 if every target answered (with --once), 1 if one did not."},
        footer = {"", "Examples:",
                "  ferry stat 127.0.0.1:9400 127.0.0.1:9401",
                "  ferry stat --once --json 127.0.0.1:9400 | jq '.processes[0].methods'"})
public final class StatCommand implements Callable<Integer> {

    private static final DateTimeFormatter CLOCK = DateTimeFormatter.ofPattern("HH:mm:ss");

    @Spec
    private CommandSpec spec;

    @Parameters(arity = "1..*", paramLabel = "HOST:PORT", description = "Metrics endpoints to watch.")
    private List<String> targets;

    @Option(names = "--interval", paramLabel = "<s>", defaultValue = "1",
            description = "Seconds between scrapes; rates and quantiles cover that interval. Default: ${DEFAULT-VALUE}.")
    private double interval;

    @Option(names = "--once", description = "Two scrapes an interval apart, one view, then exit.")
    private boolean once;

    @Option(names = "--json", description = "JSON instead of the table (one document per view).")
    private boolean json;

    @Option(names = "--count", paramLabel = "<n>", defaultValue = "0",
            description = "Stop after n views (0: until interrupted). Default: ${DEFAULT-VALUE}.")
    private int count;

    @Override
    public Integer call() throws InterruptedException {
        if (interval < 0.1 || interval > 3600) {
            throw new ParameterException(spec.commandLine(), "--interval must be in [0.1, 3600] seconds: " + interval);
        }
        PrintWriter out = spec.commandLine().getOut();
        boolean terminal = !json && System.console() != null && System.console().isTerminal();
        Map<String, Scraper.Scrape> previous = new HashMap<>();
        int views = 0;
        int limit = once ? 1 : count;
        try (Scraper scraper = new Scraper()) {
            if (once) {
                scrapeAll(scraper, previous);
                Thread.sleep((long) (interval * 1000));
            }
            while (true) {
                List<ServerStat> stats = scrapeAll(scraper, previous);
                String clock = LocalTime.now().format(CLOCK);
                if (json) {
                    out.println(StatView.json(stats, clock));
                } else {
                    if (terminal) {
                        out.print("\033[H\033[2J"); // home and clear, as top does
                    } else if (views > 0) {
                        out.println();
                    }
                    out.print(StatView.text(stats, clock, interval));
                }
                out.flush();
                views++;
                if (limit > 0 && views >= limit) {
                    return stats.stream().anyMatch(s -> s.state().equals("down")) ? 1 : 0;
                }
                Thread.sleep((long) (interval * 1000));
            }
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage(), e);
        }
    }

    private List<ServerStat> scrapeAll(Scraper scraper, Map<String, Scraper.Scrape> previous) {
        List<ServerStat> stats = new ArrayList<>();
        for (String target : targets) {
            try {
                Scraper.Scrape now = scraper.scrape(target);
                Scraper.Scrape before = previous.put(target, now);
                double seconds = before == null ? 0 : (now.nanos() - before.nanos()) / 1e9;
                stats.add(ServerStat.of(target, now.ready(), before == null ? null : before.samples(), now.samples(),
                        seconds));
            } catch (IOException e) {
                previous.remove(target);
                stats.add(ServerStat.down(target, e.getMessage()));
            }
        }
        return stats;
    }

    /** Runs {@code ferry stat} alone. */
    public static void main(String[] args) {
        System.exit(new CommandLine(new StatCommand()).execute(args));
    }
}
