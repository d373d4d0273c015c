package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.rpc.RpcResponse;

/**
 * The batching of a {@link PsClient}'s sparse pulls and pushes: a batch is planned over the
 * current {@link Route} ({@link BatchPlan}: ids deduplicated and split by owner), its parts
 * started on all their servers at once ({@link BatchParts}) and the answers scattered back into
 * the caller's order. Thread-safe; the only state is each thread's plan for its blocking pulls
 * and the plans of pushes, used again once a push has succeeded.
 */
final class SparseCalls {

    /**
     * The plan of each thread's blocking pulls, re-planned batch after batch (no garbage per
     * batch): a blocking pull uses it only until it returns, when every part has completed.
     */
    private static final ThreadLocal<BatchPlan[]> PLANS = ThreadLocal.withInitial(() -> new BatchPlan[] {new BatchPlan()});

    /** Idle plans of asynchronous pushes (one per push in flight is enough to allocate none). */
    private static final int PUSH_PLANS = 16;
    /** The largest push whose plan is kept for the next (a plan holds about 50 bytes per id). */
    private static final int PUSH_PLAN_IDS = 65_536;

    private final RoutingFollower routing;
    private final BatchParts batches;
    private final TableDirectory directory;
    private final PlanPool pushPlans = new PlanPool(PUSH_PLANS, PUSH_PLAN_IDS);

    SparseCalls(RoutingFollower routing, BatchParts batches, TableDirectory directory) {
        this.routing = routing;
        this.batches = batches;
        this.directory = directory;
    }

    /** {@link PsClient#pull(String, long[], int, int, float[], PullFormat)}. */
    void pull(String table, long[] ids, int offset, int count, float[] out, PullFormat format) {
        int dimension = ClientCalls.join(directory.dimension(table));
        if (out.length < (long) count * dimension) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; "
                    + count + " rows of dimension " + dimension + " need " + (long) count * dimension);
        }
        PullFormat wire = format != null ? format : directory.pullFormat(table);
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = routing.route();
        BatchPlan[] mine = PLANS.get();
        BatchPlan plan = mine[0].plan(ids, offset, count, r.table().slots());
        MemorySegment target = MemorySegment.ofArray(out);
        int partCount = plan.parts();
        CompletableFuture<?>[] started = new CompletableFuture<?>[partCount];
        RuntimeException failure = null;
        for (int p = 0; p < partCount && failure == null; p++) {
            try {
                started[p] = batches.startPull(r, plan, p, name, dimension, wire);
            } catch (RuntimeException e) {
                failure = e;
                partCount = p;
            }
        }
        if (partCount > 1) {
            awaitAll(started, partCount, batches.longestWaitMillis());
        }
        for (int p = 0; p < partCount; p++) {
            BatchParts.Rows rows;
            try {
                @SuppressWarnings("unchecked")
                CompletableFuture<RpcResponse> call = (CompletableFuture<RpcResponse>) started[p];
                rows = batches.awaitPull(call, r, plan, p, name, dimension, wire);
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
                continue;
            }
            try (rows) {
                if (failure == null) {
                    BatchParts.scatter(plan, p, rows, dimension, target);
                }
            }
        }
        if (failure != null) {
            // A call that failed may still be encoded again (a resend racing its deadline): it
            // keeps this plan, and the thread plans its next batches in a new one.
            mine[0] = new BatchPlan();
            throw failure;
        }
    }

    /**
     * Waits until every started part has completed, however it did: the caller then wakes once
     * per batch instead of once per part that was still out when it finished the one before.
     * Parts that must be split (null) are left to {@code awaitPull}.
     */
    private static void awaitAll(CompletableFuture<?>[] started, int count, long longestMillis) {
        int n = 0;
        CompletableFuture<?>[] out = new CompletableFuture<?>[count];
        for (int p = 0; p < count; p++) {
            if (started[p] != null && !started[p].isDone()) {
                out[n++] = started[p];
            }
        }
        if (n < 2) {
            return;
        }
        try {
            CompletableFuture.allOf(n == count ? out : Arrays.copyOf(out, n)).get(longestMillis, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            // Each part's own outcome is read next (a call left pending fails there).
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // awaitPull fails the parts still out
        }
    }

    /** Pulls {@code ids} of a table of {@code dimension} into {@code out}, in {@code format} (null: the table's). */
    CompletableFuture<Void> pullInto(String table, int dimension, long[] ids, MemorySegment out, PullFormat format) {
        PullFormat wire = format != null ? format : directory.pullFormat(table);
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = routing.route();
        BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
        CompletableFuture<?>[] parts = new CompletableFuture<?>[plan.parts()];
        for (int p = 0; p < parts.length; p++) {
            int part = p;
            parts[p] = batches.pullPart(r, plan, part, name, dimension, wire).thenAccept(rows -> {
                try (rows) {
                    BatchParts.scatter(plan, part, rows, dimension, out);
                }
            });
        }
        return CompletableFuture.allOf(parts);
    }

    /** {@link PsClient#pullView}. */
    CompletableFuture<PsClient.PullView> pullView(String table, long[] ids) {
        return directory.dimension(table).thenCompose(dimension -> {
            byte[] name = PsDescriptor.nameBytes(table);
            Route r = routing.route();
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
            List<CompletableFuture<BatchParts.Rows>> parts = new ArrayList<>();
            for (int p = 0; p < plan.parts(); p++) {
                parts.add(batches.pullPart(r, plan, p, name, dimension, PullFormat.F32));
            }
            return CompletableFuture.allOf(parts.toArray(CompletableFuture<?>[]::new)).handle((v, failure) -> {
                if (failure != null) {
                    BatchParts.releaseCompleted(parts);
                    throw failure instanceof CompletionException c ? c : new CompletionException(failure);
                }
                int[] partOf = new int[ids.length];
                int[] rowOf = new int[ids.length];
                plan.locate(partOf, rowOf);
                return new PsClient.PullView(dimension, parts.stream().map(CompletableFuture::join).toList(), partOf,
                        rowOf);
            });
        });
    }

    /** {@link PsClient#pushAsync}. */
    CompletableFuture<Void> push(String table, long[] ids, float[] gradients) {
        return directory.dimension(table).thenCompose(dimension -> {
            if (gradients.length != (long) ids.length * dimension) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, ids.length + " ids of table '" + table
                        + "' (dimension " + dimension + ") need " + (long) ids.length * dimension
                        + " gradient floats, not " + gradients.length);
            }
            FiniteGradients.check(table, ids, gradients, dimension);
            byte[] name = PsDescriptor.nameBytes(table);
            Route r = routing.route();
            PushLease lease = new PushLease(pushPlans.take().plan(ids, 0, ids.length, r.table().slots()), pushPlans);
            MemorySegment grads = MemorySegment.ofArray(gradients);
            CompletableFuture<?>[] parts = new CompletableFuture<?>[lease.plan.parts()];
            for (int p = 0; p < parts.length; p++) {
                parts[p] = batches.pushPart(r, lease, p, name, dimension, grads);
            }
            // The plan goes back before the caller hears of the push (its next push can take it),
            // or when the last writer still inside it leaves.
            return CompletableFuture.allOf(parts).whenComplete((v, failure) -> lease.end(failure == null));
        });
    }

    /** Idle push plans; for tests. */
    int idlePushPlans() {
        return pushPlans.idle();
    }
}
