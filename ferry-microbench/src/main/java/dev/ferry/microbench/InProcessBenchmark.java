package dev.ferry.microbench;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The whole parameter-server work of a request, in one process with no network (the floor under
 * every transport): the default workload over 2 servers (a balanced 2-server slot table, an Adagrad
 * table of dimension 64 on each, all {@code space} ids created up front, Zipf 1.09).
 *
 * <ul>
 *   <li>{@code fetch}: a batch of log-uniform size in [16, 4,096]: plan (one plan object,
 *       re-planned), and per part the ids
 *       written to a request buffer and read back (as a server reads them), the gather into a
 *       response buffer, the scatter into the caller's rows. Mean time per fetch.
 *   <li>{@code push4096}: a batch of 4,096 ids: plan, and per part the ids and the summed gradients
 *       written to a request buffer, the ids read back, the apply. Time per push.
 *   <li>{@code push4096Client}: the same without the apply (the client's share);
 *       {@code push4096ClientFromArray} with the gradients in a {@code float[]}, as a caller of
 *       the client's {@code push(float[])} hands them.
 * </ul>
 */
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class InProcessBenchmark extends KernelBenchmark {

    static final int MAX_BATCH = 4096;
    static final int BATCHES = 1024;
    private static final int PUSHES = 64;

    /** Ids in the table (over both servers). */
    @Param({"1048576"})
    public int space;

    private final BatchPlan plan = new BatchPlan();
    private SlotTable slots;
    private ParameterServer[] servers;
    private long[][] fetches;
    private long[][] pushes;
    private Arena arena;
    private MemorySegment[] requests;
    private MemorySegment[] responses;
    private MemorySegment caller;
    private MemorySegment gradients;
    /** The same gradients in a caller's {@code float[]}, as {@code PsClient.push(float[])} gets them, and its view. */
    private MemorySegment arrayGradients;
    private long[] serverIds;
    /** Per push batch and part: the request's gradient rows (a view made up front, so the push allocates nothing). */
    private MemorySegment[][] pushBodies;
    private int nextFetch;
    private int nextPush;

    /** Two servers with every id created; the batches drawn. */
    @Setup
    public void setUp() {
        slots = SlotTable.balanced(2);
        servers = new ParameterServer[2];
        for (int s = 0; s < 2; s++) {
            servers[s] = ParameterServer.create(PsConfig.defaults());
            servers[s].createTable(TableConfig.of("t", Workload.DIMENSION, Optimizer.adagrad(0.1)).withMaxRows(space));
        }
        Rows.populate(servers, slots, "t", space);
        Workload workload = new Workload(space, Workload.ALPHA, 1 << 20, 9);
        fetches = new long[BATCHES][];
        for (int b = 0; b < BATCHES; b++) {
            fetches[b] = workload.batch(workload.batchSize(16, MAX_BATCH));
        }
        pushes = new long[PUSHES][];
        for (int b = 0; b < PUSHES; b++) {
            pushes[b] = workload.batch(MAX_BATCH);
        }
        arena = Arena.ofShared();
        long rowsBytes = (long) MAX_BATCH * Workload.DIMENSION * Float.BYTES;
        requests = new MemorySegment[] {arena.allocate(rowsBytes + MAX_BATCH * 8L, 64),
            arena.allocate(rowsBytes + MAX_BATCH * 8L, 64)};
        responses = new MemorySegment[] {arena.allocate(rowsBytes, 64), arena.allocate(rowsBytes, 64)};
        caller = arena.allocate(rowsBytes, 64);
        gradients = arena.allocate(rowsBytes, 64);
        Workload.fillGradients(gradients, 10);
        arrayGradients = MemorySegment.ofArray(gradients.toArray(ValueLayout.JAVA_FLOAT));
        serverIds = new long[MAX_BATCH];
        pushBodies = new MemorySegment[PUSHES][];
        for (int b = 0; b < PUSHES; b++) {
            plan.plan(pushes[b], 0, MAX_BATCH, slots);
            pushBodies[b] = new MemorySegment[plan.parts()];
            for (int p = 0; p < plan.parts(); p++) {
                long n = plan.partSize(p);
                pushBodies[b][p] = requests[p].asSlice(n * Long.BYTES, n * Workload.DIMENSION * Float.BYTES);
            }
        }
    }

    /** Frees the servers. */
    @TearDown
    public void tearDown() {
        for (ParameterServer server : servers) {
            server.close();
        }
        arena.close();
    }

    /** One fetch of the default workload. */
    @Benchmark
    public void fetch() {
        long[] ids = fetches[nextFetch++ & (BATCHES - 1)];
        plan.plan(ids, 0, ids.length, slots);
        for (int p = 0; p < plan.parts(); p++) {
            int n = plan.partSize(p);
            plan.writeIds(p, requests[p]);
            MemorySegment.copy(requests[p], Rows.LONG, 0, serverIds, 0, n);
            servers[plan.server(p)].pull("t", Workload.DIMENSION, serverIds, 0, n, responses[p]);
            plan.scatterRows(p, responses[p], Workload.DIMENSION, caller);
        }
    }

    /** One push of 4,096 ids. */
    @Benchmark
    public void push4096() {
        int b = nextPush++ & (PUSHES - 1);
        long[] ids = pushes[b];
        plan.plan(ids, 0, ids.length, slots);
        for (int p = 0; p < plan.parts(); p++) {
            int n = plan.partSize(p);
            MemorySegment request = requests[p];
            plan.writeIds(p, request);
            MemorySegment body = pushBodies[b][p];
            plan.sumGradients(p, gradients, Workload.DIMENSION, body);
            MemorySegment.copy(request, Rows.LONG, 0, serverIds, 0, n);
            servers[plan.server(p)].push("t", Workload.DIMENSION, serverIds, 0, n, body);
        }
    }

    /** The client's share of {@link #push4096}: the plan, and per part the ids and the summed gradients written. */
    @Benchmark
    public void push4096Client() {
        clientShare(gradients);
    }

    /** {@link #push4096Client} with the gradients in a caller's {@code float[]}, as the client's {@code push(float[])} has them. */
    @Benchmark
    public void push4096ClientFromArray() {
        clientShare(arrayGradients);
    }

    private void clientShare(MemorySegment source) {
        int b = nextPush++ & (PUSHES - 1);
        long[] ids = pushes[b];
        plan.plan(ids, 0, ids.length, slots);
        for (int p = 0; p < plan.parts(); p++) {
            plan.writeIds(p, requests[p]);
            plan.sumGradients(p, source, Workload.DIMENSION, pushBodies[b][p]);
        }
    }
}
