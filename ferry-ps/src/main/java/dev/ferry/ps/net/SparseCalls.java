package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.rpc.CallGroup;
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
     * Each thread's blocking pulls: their plan, re-planned batch after batch, their request
     * writers and started calls, and the group they wait on, so that a pull allocates nothing of
     * its own. A blocking pull uses them only until it returns, when every part has completed;
     * after a failure the thread takes new ones.
     */
    private static final ThreadLocal<BlockingPull[]> PULLS = ThreadLocal.withInitial(() -> new BlockingPull[] {
            new BlockingPull()});

    /** One thread's blocking-pull state; see {@link #PULLS}. Confined to the thread that made it. */
    private static final class BlockingPull {
        final BatchPlan plan = new BatchPlan();
        final CallGroup group = new CallGroup();
        CompletableFuture<?>[] started = new CompletableFuture<?>[2];
        /** Per part of the batch: read (scattered, or failed) already. */
        boolean[] finished = new boolean[2];
        BatchParts.PullRequest[] requests = new BatchParts.PullRequest[0];

        /** Room for {@code parts} parts, none of them finished. */
        void reserve(int parts) {
            if (started.length < parts) {
                started = new CompletableFuture<?>[parts];
                finished = new boolean[parts];
            }
            Arrays.fill(finished, 0, parts, false);
            if (requests.length < parts) {
                BatchParts.PullRequest[] more = Arrays.copyOf(requests, parts);
                for (int p = requests.length; p < parts; p++) {
                    more[p] = new BatchParts.PullRequest();
                }
                requests = more;
            }
        }
    }

    /** Idle plans of asynchronous pushes (one per push in flight is enough to allocate none). */
    private static final int PUSH_PLANS = 16;
    /** The largest push whose plan is kept for the next (a plan holds about 50 bytes per id). */
    private static final int PUSH_PLAN_IDS = 65_536;
    /**
     * Ids from which a blocking pull of several parts scatters each part as it is answered
     * instead of waiting for all: below it, the wake-up per part costs more than the overlap saves.
     */
    static final int SCATTER_AS_ANSWERED_IDS = Integer.getInteger("ferry.ps.scatterAsAnsweredIds", 2048);

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
        int dimension = directory.knownDimension(table);
        if (dimension < 0) {
            dimension = ClientCalls.join(directory.dimension(table));
        }
        if (out.length < (long) count * dimension) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; "
                    + count + " rows of dimension " + dimension + " need " + (long) count * dimension);
        }
        PullFormat wire = format != null ? format : directory.pullFormat(table);
        byte[] name = TableNames.encode(table);
        Route r = routing.route();
        BlockingPull[] mine = PULLS.get();
        BlockingPull state = mine[0];
        BatchPlan plan = state.plan.plan(ids, offset, count, r.table().slots());
        int partCount = plan.parts();
        state.reserve(partCount);
        CompletableFuture<?>[] started = state.started;
        RuntimeException failure = null;
        for (int p = 0; p < partCount && failure == null; p++) {
            try {
                started[p] = batches.startPull(r, plan, p, name, dimension, wire, state.requests[p], state.group);
            } catch (RuntimeException e) {
                failure = e;
                partCount = p;
            }
        }
        // A small batch waits once for every part, however each ends: the thread then wakes once
        // per batch instead of once per part still out when it finished the one before. A big one
        // scatters each answer as it comes while the others are still out (the scatter of the
        // first parts off the batch's critical path, for a wake-up more). A wait that ran out (or was
        // interrupted) leaves each part's outcome to be read next, and the group may still count
        // a call of this batch, so the thread takes a new one.
        // A part the client could not send whole has no call (null): it is pulled in pieces, by
        // id, when it is read below.
        boolean[] finished = state.finished;
        boolean waited = true;
        if (partCount > 1 && failure == null && plan.count() >= SCATTER_AS_ANSWERED_IDS) {
            int left = 0;
            for (int p = 0; p < partCount; p++) {
                left += started[p] != null ? 1 : 0;
            }
            int before = -1;
            while (left > 0 && left != before && waited) {
                before = left;
                waited = state.group.awaitAtMost(left - 1, batches.longestWaitMillis(), TimeUnit.MILLISECONDS);
                for (int p = 0; p < partCount && waited; p++) {
                    if (!finished[p] && started[p] != null && started[p].isDone()) {
                        failure = finishPull(state, p, r, plan, name, dimension, wire, out, failure);
                        left--;
                    }
                }
            }
        } else if (partCount > 1) {
            waited = state.group.await(batches.longestWaitMillis(), TimeUnit.MILLISECONDS);
        }
        if (!waited) {
            mine[0] = new BlockingPull();
        }
        for (int p = 0; p < partCount; p++) {
            if (!finished[p]) {
                failure = finishPull(state, p, r, plan, name, dimension, wire, out, failure);
            }
        }
        if (failure != null) {
            // A call that failed may still be encoded again (a resend racing its deadline): it
            // keeps this plan and its writer, and the thread plans its next batches in new ones.
            mine[0] = new BlockingPull();
            throw failure;
        }
    }

    /**
     * Reads part {@code p} of a blocking pull (waiting for it if it is still out, pulling it by id
     * if it has no call), scatters it into {@code out} unless an earlier part failed, and marks it
     * finished; returns the batch's first failure.
     */
    private RuntimeException finishPull(BlockingPull state, int p, Route r, BatchPlan plan, byte[] name,
            int dimension, PullFormat wire, float[] out, RuntimeException failure) {
        @SuppressWarnings("unchecked")
        CompletableFuture<RpcResponse> call = (CompletableFuture<RpcResponse>) state.started[p];
        state.started[p] = null;
        state.finished[p] = true;
        try {
            batches.awaitPull(call, r, plan, p, name, dimension, wire, failure == null ? out : null);
            return failure;
        } catch (RuntimeException e) {
            return failure == null ? e : failure;
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
