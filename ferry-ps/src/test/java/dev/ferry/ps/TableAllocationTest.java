package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The data path allocates nothing in steady state: gathers and pushes of rows that exist, once
 * the thread's working arrays have grown, with their lines prefetched ({@link LinePrefetch}, a
 * heap array per call handed to native code) or touched (the {@code without-prefetch} run).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TableAllocationTest {

    private static final int DIMENSION = 32;
    private static final int BATCH = 512;

    @Test
    void gathersAndPushesOfExistingRowsAllocateNothing() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        SplittableRandom random = new SplittableRandom(12);
        long[][] batches = new long[4][];
        for (int b = 0; b < batches.length; b++) {
            batches[b] = random.longs(BATCH, 0, 4 * BATCH).toArray();
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults()); Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("t", DIMENSION, Optimizer.adagrad(0.1)).withShards(4));
            MemorySegment out = arena.allocate((long) BATCH * DIMENSION * Float.BYTES, 64);
            MemorySegment gradients = arena.allocate((long) BATCH * DIMENSION * Float.BYTES, 64);
            for (long at = 0; at < gradients.byteSize(); at += Float.BYTES) {
                gradients.set(RowLayout.FLOAT, at, (float) random.nextDouble(-1, 1));
            }
            for (long[] ids : batches) {
                table.gather(ids, 0, BATCH, out); // creates the rows
            }
            // Steady state: some window of 200 calls allocates nothing (a single window may catch
            // a one-off allocation of the JVM's own, or run before the calls are compiled).
            long fewest = Long.MAX_VALUE;
            for (int window = 0; window < 50 && fewest > 0; window++) {
                long before = threads.getCurrentThreadAllocatedBytes();
                for (int k = 0; k < 100; k++) {
                    long[] ids = batches[k % batches.length];
                    table.gather(ids, 0, BATCH, out);
                    table.apply(ids, 0, BATCH, gradients);
                }
                fewest = Math.min(fewest, threads.getCurrentThreadAllocatedBytes() - before);
            }
            assertEquals(0, fewest, "bytes allocated by 100 gathers and pushes, fewest of the windows");
        }
    }
}
