package dev.ferry.metrics.stat;

import java.util.List;
import java.util.Locale;

/** Draws {@link ServerStat}s: a table for a terminal, or one JSON document for scripts. */
public final class StatView {

    private StatView() {
    }

    /** The table: a header line, then per process a block of lines. */
    public static String text(List<ServerStat> stats, String clock, double interval) {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "ferry stat  %s  %d process%s, every %s s (Ctrl-C quits)%n", clock,
                stats.size(), stats.size() == 1 ? "" : "es", trim(interval)));
        for (ServerStat s : stats) {
            b.append('\n');
            b.append(String.format(Locale.ROOT, "%-22s %s%n", s.target(), s.state().toUpperCase(Locale.ROOT)
                    + (s.error() == null ? "" : ": " + s.error())));
            if (s.state().equals("down")) {
                continue;
            }
            b.append(String.format(Locale.ROOT, "  links %s   credits %s   credit stalls %s (%s/s)   window stalls %s (%s/s)"
                    + "   link failures %s%n", count(s.links()), count(s.credits()), count(s.creditStalls().total()),
                    rate(s.creditStalls().perSecond()), count(s.windowStalls().total()),
                    rate(s.windowStalls().perSecond()), count(s.linkFailures())));
            b.append(String.format(Locale.ROOT, "  in flight %s   registered %s", bytes(s.inFlightBytes()),
                    bytes(s.registeredBytes())));
            if (!Double.isNaN(s.serversOnFallback())) {
                b.append(String.format(Locale.ROOT, "   servers on fallback %s", count(s.serversOnFallback())));
            }
            b.append('\n');
            if (!s.traffic().isEmpty()) {
                b.append("  traffic in:");
                for (ServerStat.Traffic t : s.traffic()) {
                    b.append(String.format(Locale.ROOT, "  %s/%s %s msg/s %s/s", t.provider(), t.role(),
                            rate(t.messagesPerSecond()), bytes(t.bytesPerSecond())));
                }
                b.append('\n');
            }
            if (!s.methods().isEmpty()) {
                b.append(String.format(Locale.ROOT, "  %-7s %-13s %10s %8s %9s %9s %12s%n", "SIDE", "METHOD", "OPS/S",
                        "ERR/S", "P50", "P99", "CALLS"));
                for (ServerStat.MethodStat m : s.methods()) {
                    b.append(String.format(Locale.ROOT, "  %-7s %-13s %10s %8s %9s %9s %12s%n", m.side(), m.method(),
                            rate(m.opsPerSecond()), rate(m.errorsPerSecond()), seconds(m.p50()), seconds(m.p99()),
                            count(m.calls())));
                }
            }
            for (ServerStat.TableStat t : s.tables()) {
                b.append(String.format(Locale.ROOT, "  table %-20s %14s rows %10s%n", t.table(), count(t.rows()),
                        bytes(t.bytes())));
            }
        }
        return b.toString();
    }

    /** One JSON object: {@code {"time": ..., "processes": [...]}}. */
    public static String json(List<ServerStat> stats, String clock) {
        StringBuilder b = new StringBuilder("{\"time\":").append(str(clock)).append(",\"processes\":[");
        for (int i = 0; i < stats.size(); i++) {
            ServerStat s = stats.get(i);
            if (i > 0) {
                b.append(',');
            }
            b.append("{\"target\":").append(str(s.target())).append(",\"state\":").append(str(s.state()));
            if (s.error() != null) {
                b.append(",\"error\":").append(str(s.error()));
            }
            b.append(",\"links\":").append(num(s.links())).append(",\"credits\":").append(num(s.credits()))
                    .append(",\"creditStalls\":").append(num(s.creditStalls().total()))
                    .append(",\"creditStallsPerSecond\":").append(num(s.creditStalls().perSecond()))
                    .append(",\"windowStalls\":").append(num(s.windowStalls().total()))
                    .append(",\"windowStallsPerSecond\":").append(num(s.windowStalls().perSecond()))
                    .append(",\"linkFailures\":").append(num(s.linkFailures()))
                    .append(",\"inFlightBytes\":").append(num(s.inFlightBytes()))
                    .append(",\"registeredBytes\":").append(num(s.registeredBytes()))
                    .append(",\"serversOnFallback\":").append(num(s.serversOnFallback()))
                    .append(",\"methods\":[");
            for (int j = 0; j < s.methods().size(); j++) {
                ServerStat.MethodStat m = s.methods().get(j);
                b.append(j > 0 ? "," : "").append("{\"side\":").append(str(m.side())).append(",\"method\":")
                        .append(str(m.method())).append(",\"opsPerSecond\":").append(num(m.opsPerSecond()))
                        .append(",\"errorsPerSecond\":").append(num(m.errorsPerSecond()))
                        .append(",\"p50Seconds\":").append(num(m.p50())).append(",\"p99Seconds\":")
                        .append(num(m.p99())).append(",\"calls\":").append(num(m.calls())).append('}');
            }
            b.append("],\"tables\":[");
            for (int j = 0; j < s.tables().size(); j++) {
                ServerStat.TableStat t = s.tables().get(j);
                b.append(j > 0 ? "," : "").append("{\"table\":").append(str(t.table())).append(",\"rows\":")
                        .append(num(t.rows())).append(",\"bytes\":").append(num(t.bytes())).append('}');
            }
            b.append("],\"traffic\":[");
            for (int j = 0; j < s.traffic().size(); j++) {
                ServerStat.Traffic t = s.traffic().get(j);
                b.append(j > 0 ? "," : "").append("{\"provider\":").append(str(t.provider())).append(",\"role\":")
                        .append(str(t.role())).append(",\"messagesPerSecond\":").append(num(t.messagesPerSecond()))
                        .append(",\"bytesPerSecond\":").append(num(t.bytesPerSecond())).append('}');
            }
            b.append("]}");
        }
        return b.append("]}").toString();
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static String num(double v) {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            return "null";
        }
        return v == Math.rint(v) && Math.abs(v) < 1e15 ? Long.toString((long) v) : Double.toString(v);
    }

    private static String trim(double v) {
        return v == Math.rint(v) ? Long.toString((long) v) : Double.toString(v);
    }

    static String count(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%,d", (long) v);
    }

    static String rate(double v) {
        if (Double.isNaN(v)) {
            return "-";
        }
        return v >= 100 ? String.format(Locale.ROOT, "%,.0f", v) : String.format(Locale.ROOT, "%.1f", v);
    }

    static String bytes(double v) {
        if (Double.isNaN(v)) {
            return "-";
        }
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return u == 0 ? String.format(Locale.ROOT, "%.0f B", v) : String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }

    static String seconds(double s) {
        if (Double.isNaN(s)) {
            return "-";
        }
        if (s < 1e-3) {
            return String.format(Locale.ROOT, "%.0f us", s * 1e6);
        }
        if (s < 1) {
            return String.format(Locale.ROOT, "%.2f ms", s * 1e3);
        }
        return String.format(Locale.ROOT, "%.2f s", s);
    }
}
