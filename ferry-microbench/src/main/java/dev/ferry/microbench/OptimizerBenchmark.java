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
 * A server's push: {@code SparseTable.apply} of {@value #IDS} distinct ids (rows created up
 * front), dimension 64, per optimizer: time per element (weight). The whole apply is measured:
 * the finiteness check of the gradients, grouping by shard, the row lookups and the steps.
 * {@code copyLimit} copies the bytes a push touches once (every row, header and state included,
 * and the gradients).
 */
public class OptimizerBenchmark extends KernelBenchmark {

    static final int IDS = 4096;
    static final int ELEMENTS = IDS * Workload.DIMENSION;

    /** The optimizer. */
    @Param({"sgd", "adagrad", "adam", "ftrl"})
    public String optimizer;

    private ParameterServer server;
    private SparseTable table;
    private long[] ids;
    private Arena arena;
    private MemorySegment gradients;
    private MemorySegment rowsFrom;
    private MemorySegment rowsTo;

    /** Creates the rows and the gradients. */
    @Setup
    public void setUp() {
        Optimizer rule = switch (optimizer) {
            case "sgd" -> Optimizer.sgd(0.01);
            case "adagrad" -> Optimizer.adagrad(0.1);
            case "adam" -> Optimizer.adam(0.001);
            case "ftrl" -> Optimizer.ftrl(0.1);
            default -> throw new IllegalArgumentException(optimizer);
        };
        server = ParameterServer.create(PsConfig.defaults());
        table = server.createTable(TableConfig.of("t", Workload.DIMENSION, rule));
        ids = new Workload(Workload.SPACE, Workload.ALPHA, 1 << 16, 3).distinct(IDS);
        Rows.populate(table, ids);
        arena = Arena.ofShared();
        gradients = arena.allocate((long) ELEMENTS * Float.BYTES, 64);
        Workload.fillGradients(gradients, 4);
        long bytes = (long) IDS * table.config().bytesPerRow() + (long) ELEMENTS * Float.BYTES;
        rowsFrom = arena.allocate(bytes, 64);
        rowsTo = arena.allocate(bytes, 64);
    }

    /** Frees the table. */
    @TearDown
    public void tearDown() {
        server.close();
        arena.close();
    }

    /** One push of {@value #IDS} rows. */
    @Benchmark
    @OperationsPerInvocation(ELEMENTS)
    public void apply() {
        table.apply(ids, 0, IDS, gradients);
    }

    /** The rows' and gradients' bytes, copied once. */
    @Benchmark
    @OperationsPerInvocation(ELEMENTS)
    public void copyLimit() {
        MemorySegment.copy(rowsFrom, 0, rowsTo, 0, rowsTo.byteSize());
    }
}
