package dev.ferry.bench.ps;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The summary of {@code --rounds}: for each transport, the best of its ratios to {@code netty}
 * over rounds that ran every transport in turn, each ratio taken within its own round (the
 * machine drifts between rounds more than between the transports of one round), leaving out the
 * rounds that other guests of a shared host disturbed ({@link HostSteal}).
 */
final class BestOfRounds {

    private BestOfRounds() {
    }

    /**
     * Runs {@code round} {@code rounds} times, printing each round's table and JSON lines (ratios
     * within the round) and, after more than one, the best of them; every round's results.
     */
    static List<List<RunResult>> run(int rounds, PrintStream out, Supplier<List<RunResult>> round) {
        List<List<RunResult>> all = new ArrayList<>();
        for (int i = 1; i <= rounds; i++) {
            if (rounds > 1) {
                out.println("round " + i + " of " + rounds);
            }
            List<RunResult> results = round.get();
            Report.print(results, out);
            all.add(results);
        }
        if (rounds > 1) {
            print(all, out);
        }
        return all;
    }

    /** Mean, p99, CPU per op, and CPU above the floor (direct), each as a ratio to netty's in the same round. */
    static double[] ratios(List<RunResult> round, RunResult r) {
        double[] q = {Double.NaN, Double.NaN, Double.NaN, Double.NaN};
        RunResult b = Report.baseline(round, r);
        if (b == null) {
            return q;
        }
        q[0] = Floor.quotient(r.meanMicros(), b.meanMicros());
        q[1] = Floor.quotient(r.percentileMicros(99), b.percentileMicros(99));
        q[2] = Floor.quotient(r.cpuMicrosPerOp(), b.cpuMicrosPerOp());
        RunResult floor = Floor.of(round);
        if (floor != null) {
            q[3] = Floor.quotient(Floor.layerCpu(r, floor), Floor.layerCpu(b, floor));
        }
        return q;
    }

    /**
     * Whether the ratios of {@code r} in {@code round} measured the host: other guests took the
     * cores ({@link HostSteal#disturbed}) while {@code r}, its baseline or the floor was measured.
     */
    static boolean disturbed(List<RunResult> round, RunResult r) {
        RunResult b = Report.baseline(round, r);
        RunResult floor = Floor.of(round);
        return HostSteal.disturbed(r) || b != null && HostSteal.disturbed(b)
                || floor != null && HostSteal.disturbed(floor);
    }

    /**
     * The table, Markdown-compatible: each best ratio with the round it came from; empty without
     * netty. Rounds that other guests of the host {@linkplain #disturbed disturbed} are left out
     * while an undisturbed round remains; a ratio taken from a disturbed round is marked {@code *}.
     */
    static List<String> table(List<List<RunResult>> rounds) {
        Set<String> labels = new LinkedHashSet<>();
        rounds.forEach(round -> round.forEach(r -> labels.add(r.label())));
        List<String> lines = new ArrayList<>();
        for (String label : labels) {
            double[] best = {Double.NaN, Double.NaN, Double.NaN, Double.NaN};
            int[] at = new int[4];
            boolean[] quiet = new boolean[rounds.size()];
            boolean quietOnly = false;
            for (int i = 0; i < rounds.size(); i++) {
                RunResult r = find(rounds.get(i), label);
                quiet[i] = r != null && !disturbed(rounds.get(i), r);
                quietOnly |= quiet[i];
            }
            for (int i = 0; i < rounds.size(); i++) {
                RunResult r = find(rounds.get(i), label);
                if (r == null || r.transport().equals(Report.BASELINE) || r.transport().equals(BenchTransport.FLOOR)
                        || quietOnly && !quiet[i]) {
                    continue;
                }
                double[] q = ratios(rounds.get(i), r);
                for (int k = 0; k < 4; k++) {
                    if (Double.isFinite(q[k]) && !(q[k] >= best[k])) {
                        best[k] = q[k];
                        at[k] = i + 1;
                    }
                }
            }
            if (Double.isFinite(best[0])) {
                String mark = quietOnly ? "" : "*";
                lines.add(String.format(Locale.ROOT, "| %-10s | %12s | %12s | %12s | %12s |", label,
                        cell(best[0], at[0]) + mark, cell(best[1], at[1]) + mark, cell(best[2], at[2]) + mark,
                        cell(best[3], at[3]) + mark));
            }
        }
        if (lines.isEmpty()) {
            return lines;
        }
        lines.add(0, "|------------|-------------:|-------------:|-------------:|-------------:|");
        lines.add(0, String.format(Locale.ROOT, "| %-10s | %12s | %12s | %12s | %12s |", "transport", "mean", "p99",
                "cpu", "layer cpu"));
        return lines;
    }

    /** Prints the table under a heading, if there is one to print. */
    static void print(List<List<RunResult>> rounds, PrintStream out) {
        List<String> table = table(rounds);
        if (!table.isEmpty()) {
            out.println();
            out.println("best of " + rounds.size() + " rounds: each transport's lowest ratio to " + Report.BASELINE
                    + " in the same round (round in brackets); layer cpu is the CPU above direct; rounds in which"
                    + " other guests of the host took more than " + Math.round(100 * HostSteal.DISTURBED)
                    + "% of the cores are left out (* where every round was)");
            table.forEach(out::println);
        }
    }

    private static RunResult find(List<RunResult> round, String label) {
        for (RunResult r : round) {
            if (r.label().equals(label)) {
                return r;
            }
        }
        return null;
    }

    private static String cell(double ratio, int round) {
        return Double.isFinite(ratio) ? String.format(Locale.ROOT, "%.2fx (r%d)", ratio, round) : "-";
    }
}
