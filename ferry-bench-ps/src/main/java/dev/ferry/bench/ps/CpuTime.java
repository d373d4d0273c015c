package dev.ferry.bench.ps;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collection;
import java.util.function.LongUnaryOperator;

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
            return cpuNanos(Files.readString(Path.of("/proc", Long.toString(pid), "stat")));
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** The sum over {@code pids}; processes that are gone count 0. */
    static long nanos(Collection<Long> pids) {
        return sum(pids, CpuTime::nanos);
    }

    /**
     * CPU nanoseconds used so far by the JIT compiler threads of JVM {@code pid} (threads named
     * {@code C1 CompilerThread<n>} or {@code C2 CompilerThread<n>}), or -1 if it is gone or this is
     * not Linux. A lower bound: the JVM stops compiler threads that fall idle, and their time
     * leaves {@code /proc} with them.
     */
    static long compilerNanos(long pid) {
        long sum = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid), "task"))) {
            for (Path task : tasks) {
                try {
                    String stat = Files.readString(task.resolve("stat"));
                    String name = stat.substring(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
                    if (name.startsWith("C1 CompilerThre") || name.startsWith("C2 CompilerThre")) {
                        sum += cpuNanos(stat);
                    }
                } catch (IOException | RuntimeException e) {
                    // the thread ended while it was read: its time is gone with it
                }
            }
            return sum;
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** {@link #compilerNanos(long)} summed over {@code pids}; processes that are gone count 0. */
    static long compilerNanos(Collection<Long> pids) {
        return sum(pids, CpuTime::compilerNanos);
    }

    /** User plus system time of a {@code stat} line of {@code /proc} (a process's or a thread's). */
    private static long cpuNanos(String stat) {
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        // Fields 14 (utime) and 15 (stime) of the line are 12 and 13 after the name.
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) * NANOS_PER_TICK;
    }

    private static long sum(Collection<Long> pids, LongUnaryOperator nanosOf) {
        long sum = 0;
        for (long pid : pids) {
            sum += Math.max(0, nanosOf.applyAsLong(pid));
        }
        return sum;
    }
}
