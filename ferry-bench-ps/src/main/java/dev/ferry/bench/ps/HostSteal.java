package dev.ferry.bench.ps;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The CPU time the hypervisor gave to other guests while this one had work (steal), from the
 * {@code cpu} line of {@code /proc/stat}. On a shared host other guests take this guest's cores
 * for seconds at a time; a measured interval in which they did measures the host, not the
 * transport, so each run records its share and the best of several rounds leaves such runs out.
 *
 * @param stealTicks the guest's steal time so far, in clock ticks
 * @param totalTicks user, nice, system, idle, I/O wait, interrupts and steal so far, in clock ticks
 */
record HostSteal(long stealTicks, long totalTicks) {

    /** The counter a run's share goes in, in thousandths of the guest's CPU time. */
    static final String COUNTER = "host_steal_permille";

    /**
     * Above this share of the guest's CPU time over the measured interval a run is disturbed: a
     * quiet minute of this host stays under 2%, a neighbour's burst takes 15-40% for a few seconds.
     */
    static final double DISTURBED = 0.05;

    /** The counters now; null where {@code /proc/stat} cannot be read (not Linux). */
    static HostSteal now() {
        try {
            return parse(Files.readAllLines(Path.of("/proc/stat")).getFirst());
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** The aggregate {@code cpu} line of {@code /proc/stat}; null if it is not one. */
    static HostSteal parse(String cpuLine) {
        String[] f = cpuLine.trim().split("\\s+");
        if (!f[0].equals("cpu") || f.length < 9) {
            return null;
        }
        long total = 0;
        for (int i = 1; i <= 8; i++) {
            total += Long.parseLong(f[i]);
        }
        return new HostSteal(Long.parseLong(f[8]), total);
    }

    /** No ticks: the start of a sum of intervals. */
    static final HostSteal NONE = new HostSteal(0, 0);

    /** Steal's share of the guest's CPU time from {@code from} to {@code to}; NaN if either is missing. */
    static double share(HostSteal from, HostSteal to) {
        return from == null || to == null ? Double.NaN : to.since(from).share();
    }

    /** The ticks from the reading {@code earlier} to this one. */
    HostSteal since(HostSteal earlier) {
        return new HostSteal(stealTicks - earlier.stealTicks, totalTicks - earlier.totalTicks);
    }

    /** The ticks of this interval and {@code other} together. */
    HostSteal plus(HostSteal other) {
        return new HostSteal(stealTicks + other.stealTicks, totalTicks + other.totalTicks);
    }

    /** Steal's share of the ticks of this interval; NaN if it has none. */
    double share() {
        return totalTicks <= 0 ? Double.NaN : (double) stealTicks / totalTicks;
    }

    /** The share recorded in {@code r}; NaN if it has none. */
    static double of(RunResult r) {
        Long permille = r.counters().get(COUNTER);
        return permille == null ? Double.NaN : permille / 1000.0;
    }

    /** Whether other guests took more than {@link #DISTURBED} of the cores while {@code r} was measured. */
    static boolean disturbed(RunResult r) {
        return of(r) > DISTURBED;
    }
}
