package dev.ferry.bench.ps;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.SlotTable;

/**
 * The routing of Ferry's {@link dev.ferry.ps.net.PsClient}, for the gRPC client: a batch is planned with {@link BatchPlan} (ids deduplicated
 * and split by owning server), each part goes to its server, and pulled rows are scattered back
 * into the caller's order. Subclasses only move one part's bytes.
 */
abstract class RoutedClient implements PsBenchClient {

    private final SlotTable slots;

    RoutedClient(int servers) {
        this.slots = SlotTable.balanced(servers);
    }

    /**
     * Pulls the rows of {@code ids} (distinct) from {@code server}; {@code rows} receives a view of
     * {@code ids.length} rows before the future completes, valid only during the call.
     */
    abstract CompletableFuture<Void> pullPart(int server, String table, int dimension, long[] ids,
            Consumer<MemorySegment> rows);

    /**
     * Pushes to {@code server} one gradient row per id of {@code ids}; {@code gradients} writes
     * them into the segment it is given ({@code ids.length * dimension * 4} bytes), possibly
     * more than once.
     */
    abstract CompletableFuture<Void> pushPart(int server, String table, int dimension, long[] ids,
            Consumer<MemorySegment> gradients);

    @Override
    public final CompletableFuture<Void> pull(String table, int dimension, long[] ids, int count, float[] rowsOut) {
        MemorySegment out = MemorySegment.ofArray(rowsOut);
        BatchPlan plan = BatchPlan.of(ids, 0, count, slots);
        int parts = plan.parts();
        if (parts == 1) {
            return pullPart(plan.server(0), table, dimension, plan.ids(0),
                    rows -> plan.scatterRows(0, rows, dimension, out));
        }
        CompletableFuture<?>[] futures = new CompletableFuture<?>[parts];
        for (int p = 0; p < parts; p++) {
            int part = p;
            futures[p] = pullPart(plan.server(p), table, dimension, plan.ids(p),
                    rows -> plan.scatterRows(part, rows, dimension, out));
        }
        return CompletableFuture.allOf(futures);
    }

    @Override
    public final CompletableFuture<Void> push(String table, int dimension, long[] ids, int count, float[] rows) {
        MemorySegment gradients = MemorySegment.ofArray(rows).asSlice(0, (long) count * dimension * Float.BYTES);
        BatchPlan plan = BatchPlan.of(ids, 0, count, slots);
        int parts = plan.parts();
        CompletableFuture<?>[] futures = new CompletableFuture<?>[parts];
        for (int p = 0; p < parts; p++) {
            int part = p;
            futures[p] = pushPart(plan.server(p), table, dimension, plan.ids(p),
                    out -> plan.sumGradients(part, gradients, dimension, out));
        }
        return parts == 1 ? futures[0].thenApply(x -> null) : CompletableFuture.allOf(futures);
    }
}
