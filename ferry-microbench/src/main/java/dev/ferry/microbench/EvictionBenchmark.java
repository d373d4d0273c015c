package dev.ferry.microbench;

import dev.ferry.ps.EvictionPolicy;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Pull latency while the server's evictor deletes rows, against the same load without
 * eviction ({@code eviction=off}), in one JMH run: the distribution of one gather of
 * {@value #PULL} distinct ids of the hot set (JMH's sample mode reports p50, p99, p99.9).
 *
 * <p>The table: dimension 16, SGD, {@code capacity} rows ({@code off}: no bound), filled to
 * 90% with {@value #HOT} hot ids and cold ones. Beside the measured thread, a churn thread pushes
 * {@value #CHURN} new cold ids and {@value #CHURN} hot ids (cycling) every 10 ms, so that the
 * table keeps going over its trigger and the evictor (a pass over every row, a sort, deletions
 * in steps under the shard locks) runs all the time; the hot rows are refreshed every two
 * seconds and stay the most recently (and most often) updated, so the pulled rows are never
 * evicted and every pull does the same work in each mode. Without eviction the table grows by
 * the churn (a few hundred thousand rows over a run).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@State(Scope.Benchmark)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--add-modules=jdk.incubator.vector"})
public class EvictionBenchmark {

    static final int PULL = 512;
    static final int HOT = 50_000;
    static final int CHURN = 256;
    private static final int DIMENSION = 16;
    private static final int BATCHES = 256;

    /** {@code off}, {@code lru} or {@code lfu}. */
    @Param({"off", "lru", "lfu"})
    public String eviction;

    /** The capacity (and with {@code off}, the rows filled at the start: 90% of it). */
    @Param({"200000"})
    public int capacity;

    private ParameterServer server;
    private SparseTable table;
    private long[][] batches;
    private Arena arena;
    private MemorySegment out;
    private Thread churn;
    private volatile boolean stopped;
    private int next;

    /** Creates and fills the table, starts the churn. */
    @Setup
    public void setUp() {
        server = ParameterServer.create(PsConfig.defaults());
        TableConfig config = TableConfig.of("t", DIMENSION, Optimizer.sgd(0.01)).withMaxRows(8L * capacity);
        if (!eviction.equals("off")) {
            config = config.capacity(capacity, eviction.equals("lru") ? EvictionPolicy.LEAST_RECENTLY_UPDATED
                    : EvictionPolicy.LEAST_FREQUENTLY_USED, 0.1);
        }
        table = server.createTable(config);
        int filled = capacity * 9 / 10;
        long[] ids = new long[filled];
        for (int i = 0; i < filled; i++) {
            ids[i] = i;
        }
        Rows.populate(table, ids);
        // Every hot row gets steps: under LFU it must outrank the cold rows pushed once.
        float[] g = new float[CHURN * DIMENSION];
        java.util.Arrays.fill(g, 0.001f);
        MemorySegment grads = MemorySegment.ofArray(g);
        long[] hot = new long[CHURN];
        for (int round = 0; round < 3; round++) {
            for (int from = 0; from < HOT; from += CHURN) {
                for (int i = 0; i < CHURN; i++) {
                    hot[i] = (from + i) % HOT;
                }
                table.apply(hot, 0, CHURN, grads);
            }
        }
        SplittableRandom random = new SplittableRandom(17);
        batches = new long[BATCHES][];
        for (int b = 0; b < BATCHES; b++) {
            batches[b] = random.ints(0, HOT).distinct().limit(PULL).asLongStream().toArray();
        }
        arena = Arena.ofShared();
        out = arena.allocate((long) PULL * DIMENSION * Float.BYTES, 64);
        churn = Thread.ofPlatform().daemon().name("churn").start(() -> churn(grads));
    }

    private void churn(MemorySegment grads) {
        long[] cold = new long[CHURN];
        long[] hot = new long[CHURN];
        long nextCold = 1L << 40;
        int nextHot = 0;
        long period = 10_000_000L;
        long due = System.nanoTime();
        while (!stopped) {
            for (int i = 0; i < CHURN; i++) {
                cold[i] = nextCold++;
                hot[i] = nextHot;
                nextHot = (nextHot + 1) % HOT;
            }
            table.apply(cold, 0, CHURN, grads);
            table.apply(hot, 0, CHURN, grads);
            due += period;
            long wait = due - System.nanoTime();
            if (wait > 0) {
                LockSupport.parkNanos(wait);
            }
        }
    }

    /** Stops the churn, prints the table's counters, frees the table. */
    @TearDown
    public void tearDown() throws InterruptedException {
        stopped = true;
        churn.join();
        System.out.println();
        System.out.println("eviction=" + eviction + ": " + table.stats());
        server.close();
        arena.close();
    }

    /** One gather of {@value #PULL} distinct hot rows. */
    @Benchmark
    public void pull() {
        table.gather(batches[next++ & (BATCHES - 1)], 0, PULL, out);
    }
}
