package dev.ferry.microbench;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * A server's gather: {@value #DISTINCT} distinct Zipf ids (a part of a client batch, already
 * deduplicated) from a table of {@code rows} rows (all created up front), dimension 64 unless
 * {@code dimension} says otherwise: time per distinct row. The table is Adagrad's for any
 * {@code optimizer} but {@code sgd}. {@code copyLimit} copies the same bytes from one contiguous
 * segment (the limit: no lookup, no cache miss per row).
 */
public class GatherBenchmark extends KernelBenchmark {

    static final int DISTINCT = 1024;
    private static final int BATCHES = 256;

    /** Rows in the table. */
    @Param({"1048576"})
    public int rows;

    /**
     * The table's optimizer: Adagrad rows hold their accumulator beside the weights (528 bytes);
     * SGD rows are weights only (272 bytes), what a table keeping weights apart from state would
     * read.
     */
    @Param({"adagrad"})
    public String optimizer;

    /** Floats per row (64: the workload's; wider rows put more lines under way per gather). */
    @Param({"64"})
    public int dimension;

    private ParameterServer server;
    private SparseTable table;
    private long[][] batches;
    private Arena arena;
    private MemorySegment out;
    private MemorySegment source;
    private int next;

    /** Creates and fills the table; draws the batches. */
    @Setup
    public void setUp() {
        server = ParameterServer.create(PsConfig.defaults());
        Optimizer rule = optimizer.equals("sgd") ? Optimizer.sgd(0.1) : Optimizer.adagrad(0.1);
        table = server.createTable(TableConfig.of("t", dimension, rule).withMaxRows(rows));
        long[] all = new long[rows];
        for (int i = 0; i < rows; i++) {
            all[i] = i;
        }
        Rows.populate(table, all);
        Workload workload = new Workload(rows, Workload.ALPHA, 1 << 20, 2);
        batches = new long[BATCHES][];
        for (int b = 0; b < BATCHES; b++) {
            batches[b] = workload.distinct(DISTINCT);
        }
        arena = Arena.ofShared();
        out = arena.allocate((long) DISTINCT * dimension * Float.BYTES, 64);
        source = arena.allocate(out.byteSize(), 64);
    }

    /** Frees the table. */
    @TearDown
    public void tearDown() {
        server.close();
        arena.close();
    }

    /** One gather of {@value #DISTINCT} distinct rows. */
    @Benchmark
    @OperationsPerInvocation(DISTINCT)
    public void gather() {
        table.gather(batches[next++ & (BATCHES - 1)], 0, DISTINCT, out);
    }

    /** The same bytes by one copy. */
    @Benchmark
    @OperationsPerInvocation(DISTINCT)
    public void copyLimit() {
        MemorySegment.copy(source, 0, out, 0, out.byteSize());
    }
}
