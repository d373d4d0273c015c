package dev.ferry.bench.ps;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;

/**
 * CPU time of processes from {@code /proc/<pid>/stat}: user plus system time of all their
 * threads, in clock ticks of 10 ms (Linux reports them in USER_HZ, 100 per second).
 */
final class CpuTime {

    static final long NANOS_PER_TICK = 10_000_000L;

    private CpuTime() {
    }

    /** CPU nanoseconds used so far by {@code pid}, or -1 if it is gone or this is not Linux. */
    static long nanos(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
            // The command name (field 2) is in parentheses and may hold spaces: count after it.
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            // Fields 14 (utime) and 15 (stime) of the line are 12 and 13 after the name.
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * NANOS_PER_TICK;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** The sum over {@code pids}; processes that are gone count 0. */
    static long nanos(Collection<Long> pids) {
        long sum = 0;
        for (long pid : pids) {
            sum += Math.max(0, nanos(pid));
        }
        return sum;
    }
}
