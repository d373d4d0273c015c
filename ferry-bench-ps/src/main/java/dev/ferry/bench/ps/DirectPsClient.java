package dev.ferry.bench.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.SlotTable;

/**
 * The floor of the benchmarks ({@code direct}): the parameter-server work of a pull or push with
 * no RPC and no transport. The calling thread plans the batch ({@link BatchPlan}: ids
 * deduplicated and split by owning server, as {@link dev.ferry.ps.net.PsClient} does), then for
 * each part does what the server would do and what the client would do with the answer: a pull
 * gathers the part's rows from that server's {@link ParameterServer} into an off-heap buffer
 * (the server's reply buffer) and scatters them into the caller's order; a push sums the part's
 * gradients into an off-heap buffer (the request buffer) and applies them on the server. Every
 * thread has its own buffer, grown to the largest part it has seen.
 */
final class DirectPsClient implements PsBenchClient {

    private final List<ParameterServer> servers;
    private final SlotTable slots;
    /** Each thread's plan, re-planned batch after batch for its pulls and pushes (all done on the calling thread). */
    private final ThreadLocal<BatchPlan> plans = ThreadLocal.withInitial(BatchPlan::new);
    private final ThreadLocal<MemorySegment[]> scratch = ThreadLocal.withInitial(() -> new MemorySegment[1]);
    /** Each thread's copy of a part's ids, as a server reads them out of the request (grown, never shrunk). */
    private final ThreadLocal<long[][]> partIds = ThreadLocal.withInitial(() -> new long[][] {new long[1024]});

    DirectPsClient(List<ParameterServer> servers) {
        this.servers = List.copyOf(servers);
        this.slots = SlotTable.balanced(servers.size());
    }

    @Override
    public CompletableFuture<Void> pull(String table, int dimension, long[] ids, int count, float[] out) {
        pullAndWait(table, dimension, ids, count, out);
        return CompletableFuture.completedFuture(null);
    }

    @Override
    public void pullAndWait(String table, int dimension, long[] ids, int count, float[] out) {
        BatchPlan plan = plans.get().plan(ids, 0, count, slots);
        for (int p = 0; p < plan.parts(); p++) {
            int n = plan.partSize(p);
            MemorySegment rows = buffer((long) n * dimension * Float.BYTES);
            servers.get(plan.server(p)).pull(table, dimension, ids(plan, p), 0, n, rows);
            plan.scatterRows(p, rows, dimension, out); // into the caller's array, as PsClient's pull does
        }
    }

    @Override
    public CompletableFuture<Void> push(String table, int dimension, long[] ids, int count, float[] gradients) {
        MemorySegment source = MemorySegment.ofArray(gradients).asSlice(0, (long) count * dimension * Float.BYTES);
        BatchPlan plan = plans.get().plan(ids, 0, count, slots);
        for (int p = 0; p < plan.parts(); p++) {
            int n = plan.partSize(p);
            MemorySegment rows = buffer((long) n * dimension * Float.BYTES);
            plan.sumGradients(p, source, dimension, rows);
            servers.get(plan.server(p)).push(table, dimension, ids(plan, p), 0, n, rows);
        }
        return CompletableFuture.completedFuture(null);
    }

    /** A part's ids in this thread's array, which holds them from index 0. */
    private long[] ids(BatchPlan plan, int part) {
        long[][] mine = partIds.get();
        if (mine[0].length < plan.partSize(part)) {
            mine[0] = new long[Math.max(plan.partSize(part), 2 * mine[0].length)];
        }
        plan.copyIds(part, mine[0]);
        return mine[0];
    }

    /** This thread's buffer, at least {@code bytes} long; exactly {@code bytes} of it. */
    private MemorySegment buffer(long bytes) {
        MemorySegment[] mine = scratch.get();
        if (mine[0] == null || mine[0].byteSize() < bytes) {
            mine[0] = Arena.ofAuto().allocate(Math.max(bytes, 64 * 1024), 64);
        }
        return mine[0].asSlice(0, bytes);
    }

    /** Every pull and push is done on the calling thread, which never waits. */
    @Override
    public boolean onCallingThread() {
        return true;
    }

    @Override
    public Map<String, Long> counters() {
        return Map.of();
    }

    @Override
    public void close() {
    }
}
