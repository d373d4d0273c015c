package dev.ferry.microbench;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.SlotTable;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The client's row work for a batch of 4,096 Zipf ids with their duplicates, dimension 64,
 * 2 servers, plans built up front: {@code sumGradients} (the caller's gradient rows summed into one
 * row per distinct id, every part) and {@code scatterRows} (the response rows copied to every
 * caller position, every part), time per caller id (one 256-byte row). {@code copyLimit} copies
 * the caller's 4,096 rows once.
 */
public class GradientBenchmark extends KernelBenchmark {

    static final int BATCH = 4096;
    private static final int BATCHES = 16;

    private BatchPlan[] plans;
    private Arena arena;
    private MemorySegment caller;
    private MemorySegment[] parts;
    private MemorySegment copy;
    private int next;

    /** Plans the batches; allocates the buffers. */
    @Setup
    public void setUp() {
        SlotTable slots = SlotTable.balanced(2);
        Workload workload = Workload.defaults(5);
        plans = new BatchPlan[BATCHES];
        for (int b = 0; b < BATCHES; b++) {
            plans[b] = BatchPlan.of(workload.batch(BATCH), 0, BATCH, slots);
        }
        arena = Arena.ofShared();
        long bytes = (long) BATCH * Workload.DIMENSION * Float.BYTES;
        caller = arena.allocate(bytes, 64);
        Workload.fillGradients(caller, 6);
        parts = new MemorySegment[] {arena.allocate(bytes, 64), arena.allocate(bytes, 64)};
        Workload.fillGradients(parts[0], 7);
        Workload.fillGradients(parts[1], 8);
        copy = arena.allocate(bytes, 64);
    }

    /** Frees the buffers. */
    @TearDown
    public void tearDown() {
        arena.close();
    }

    /** Sums the duplicate gradients of every part. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void sumGradients() {
        BatchPlan plan = plans[next++ & (BATCHES - 1)];
        for (int p = 0; p < plan.parts(); p++) {
            plan.sumGradients(p, caller, Workload.DIMENSION, parts[p]);
        }
    }

    /** Copies every part's rows to their caller positions. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void scatterRows() {
        BatchPlan plan = plans[next++ & (BATCHES - 1)];
        for (int p = 0; p < plan.parts(); p++) {
            plan.scatterRows(p, parts[p], Workload.DIMENSION, caller);
        }
    }

    /** The caller's rows, copied once. */
    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void copyLimit() {
        MemorySegment.copy(caller, 0, copy, 0, copy.byteSize());
    }
}
