package dev.ferry.cluster;

import java.util.ArrayList;
import java.util.List;

/**
 * The live export's options of a cluster member ({@code bin/ferry server --cluster ...}).
 *
 * @param serving        a read-only serving member that follows a training cluster
 * @param follow         the training cluster: {@code zk://host:port/name} or {@code ferry://host:port,...}
 * @param intervalMillis how often the serving member asks the training servers for changed rows;
 *                       default 10 s (a serving copy at most about two intervals behind training)
 */
public record ExportOptions(boolean serving, String follow, long intervalMillis) {

    /** The default interval: 10 s. */
    public static final long DEFAULT_INTERVAL_MILLIS = 10_000;
    /** A training member (it answers followers, follows nobody). */
    public static final ExportOptions NONE = new ExportOptions(false, null, DEFAULT_INTERVAL_MILLIS);

    /** Checks the values. */
    public ExportOptions {
        if (serving && (follow == null || follow.isBlank())) {
            throw new IllegalArgumentException("--serving in a cluster needs --follow <training cluster>");
        }
        if (follow != null && !follow.startsWith("zk://") && !follow.startsWith("ferry://")) {
            throw new IllegalArgumentException("--follow takes zk://host:port/name or ferry://host:port,...: " + follow);
        }
        if (!serving && follow != null) {
            throw new IllegalArgumentException("--follow is for a --serving member");
        }
        if (intervalMillis < 1) {
            throw new IllegalArgumentException("--export-interval must be at least 1 ms: " + intervalMillis);
        }
    }

    /** A serving member following {@code follow} every {@code intervalMillis}. */
    public static ExportOptions following(String follow, long intervalMillis) {
        return new ExportOptions(true, follow, intervalMillis);
    }

    /** The command-line arguments that give these options. */
    public List<String> toArgs() {
        if (!serving) {
            return List.of();
        }
        return List.of("--serving", "--follow", follow, "--export-interval", Long.toString(intervalMillis));
    }

    /**
     * Takes {@code --serving}, {@code --follow} and {@code --export-interval} out of {@code args};
     * the other arguments go to {@code rest} in order.
     *
     * @throws IllegalArgumentException for a missing or bad value
     */
    public static ExportOptions extract(String[] args, List<String> rest) {
        boolean serving = false;
        String follow = null;
        long interval = DEFAULT_INTERVAL_MILLIS;
        List<String> others = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--serving" -> serving = true;
                case "--follow" -> follow = value(args, ++i, "--follow");
                case "--export-interval" -> interval = Long.parseLong(value(args, ++i, "--export-interval"));
                default -> others.add(args[i]);
            }
        }
        rest.addAll(others);
        return new ExportOptions(serving, follow, interval);
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }
}
