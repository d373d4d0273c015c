package dev.ferry.microbench;

import java.lang.management.ManagementFactory;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.profile.InternalProfiler;
import org.openjdk.jmh.results.AggregationPolicy;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.ScalarResult;

/**
 * {@code -prof dev.ferry.microbench.CpuTimeProfiler}: the benchmark JVM's CPU time per operation,
 * in the benchmark's time unit, beside JMH's wall time. On a shared machine the wall time counts
 * the time the benchmark thread waited for a core; its CPU time does not (cache contention
 * still counts). In steady state the JVM's other threads (JIT, GC with nothing allocated) add
 * next to nothing.
 */
public final class CpuTimeProfiler implements InternalProfiler {

    private long before;

    @Override
    public String getDescription() {
        return "process CPU time per operation";
    }

    @Override
    public void beforeIteration(BenchmarkParams benchmark, IterationParams iteration) {
        before = cpuNanos();
    }

    @Override
    @SuppressWarnings("rawtypes") // JMH's interface
    public Collection<? extends Result> afterIteration(BenchmarkParams benchmark, IterationParams iteration,
            IterationResult result) {
        long cpu = cpuNanos() - before;
        long ops = result.getMetadata().getMeasuredOps();
        TimeUnit unit = benchmark.getTimeUnit();
        double perOp = ops == 0 ? Double.NaN : cpu / (double) ops / unit.toNanos(1);
        return List.of(new ScalarResult("cpu", perOp, shortName(unit) + "/op", AggregationPolicy.AVG));
    }

    private static long cpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    private static String shortName(TimeUnit unit) {
        return switch (unit) {
            case NANOSECONDS -> "ns";
            case MICROSECONDS -> "us";
            case MILLISECONDS -> "ms";
            default -> unit.name().toLowerCase(java.util.Locale.ROOT);
        };
    }
}
