package dev.ferry.microbench;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.SlotTable;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Setup;

/**
 * Planning a client batch of 4,096 Zipf ids (with their duplicates) for a 2-server slot table:
 * time per id. {@code planOf} builds a new plan per batch; {@code planReused} re-plans one plan
 * object, the allocation-free path.
 */
public class PlanBenchmark extends KernelBenchmark {

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
