package dev.ferry.microbench;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.SlotTable;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Planning a client batch of 4,096 Zipf ids (with their duplicates) for a 2-server slot table:
 * time per id. {@code planOf} builds a new plan per batch; {@code planReused} re-plans one plan
 * object, the allocation-free path.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Thread)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules=jdk.incubator.vector"})
public class PlanBenchmark {

    static final int BATCH = 4096;
    private static final int BATCHES = 64;

    private final BatchPlan reused = new BatchPlan();
    private SlotTable slots;
    private long[][] batches;
    private int next;

    /** Draws the batches. */
    @Setup
    public void setUp() {
        slots = SlotTable.balanced(2);
        Workload workload = Workload.defaults(1);
        batches = new long[BATCHES][];
        for (int b = 0; b < BATCHES; b++) {
            batches[b] = workload.batch(BATCH);
        }
    }

    /** A new plan per batch. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public BatchPlan planOf() {
        long[] ids = batches[next++ & (BATCHES - 1)];
        return BatchPlan.of(ids, 0, ids.length, slots);
    }

    /** One plan object re-planned per batch (the data path's way: no garbage). */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public BatchPlan planReused() {
        long[] ids = batches[next++ & (BATCHES - 1)];
        return reused.plan(ids, 0, ids.length, slots);
    }
}
