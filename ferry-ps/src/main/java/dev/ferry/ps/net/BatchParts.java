package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.rpc.CallGroup;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcException;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.rpc.RpcTimeoutException;

/**
 * The parts of a batch, one per server of a {@link BatchPlan}, on the wire. Two paths: the fast
 * one (one request per part, ids and summed gradients encoded straight from the plan into the
 * send buffer, rows left in the receive buffer), and the resilient one (a part split to the
 * servers' request limits, or sent again by id after a refusal, into the client's own copy).
 * Thread-safe: it keeps no state per batch.
 */
final class BatchParts {

    /** How long past its deadline a blocking pull waits for the RPC layer to complete the call. */
    private static final long LOST_TIMER_MARGIN_MILLIS = 10_000;

    private final ClientCalls calls;
    private final RoutingFollower routing;
    private final RetryPolicy retry;
    private final AtomicLong pushSequence = new AtomicLong();

    BatchParts(ClientCalls calls, RoutingFollower routing, RetryPolicy retry) {
        this.calls = calls;
        this.routing = routing;
        this.retry = retry;
    }

    /**
     * Rows of a part in {@code format}: a view of a response (released on close) or the client's
     * own copy (always f32).
     */
    record Rows(MemorySegment segment, RpcResponse response, PullFormat format) implements AutoCloseable {
        @Override
        public void close() {
            if (response != null) {
                response.release();
            }
        }
    }

    /**
     * Copies a part's rows to every caller position that asked for them, decoding them first
     * into a copy of the part's distinct rows if they are encoded.
     */
    static void scatter(BatchPlan plan, int part, Rows rows, int dimension, MemorySegment out) {
        if (rows.format() == PullFormat.F32) {
            plan.scatterRows(part, rows.segment(), dimension, out);
            return;
        }
        float[] decoded = decode(rows.segment(), rows.format(), plan.partSize(part), dimension);
        plan.scatterRows(part, MemorySegment.ofArray(decoded), dimension, out);
    }

    /** The {@code n} encoded rows at the start of {@code encoded}, decoded into a new f32 array. */
    private static float[] decode(MemorySegment encoded, PullFormat format, int n, int dimension) {
        float[] decoded = new float[Math.multiplyExact(n, dimension)];
        long encodedRow = format.rowBytes(dimension);
        for (int k = 0; k < n; k++) {
            format.decodeRow(encoded, k * encodedRow, dimension, decoded, k * dimension);
        }
        return decoded;
    }

    /** The longest a blocking pull waits for one call: its deadline and a margin against a lost timer. */
    long longestWaitMillis() {
        return retry.deadlineMillis() + LOST_TIMER_MARGIN_MILLIS;
    }

    /** Releases the rows of the parts that completed (after another part failed). */
    static void releaseCompleted(List<CompletableFuture<Rows>> parts) {
        for (CompletableFuture<Rows> f : parts) {
            if (f.isDone() && !f.isCompletedExceptionally()) {
                f.join().close();
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Pull

    /**
     * Pulls a part's rows in {@code format}. The fast path leaves them encoded in the receive
     * buffer; a part split or retried comes back decoded, as f32 in the client's own memory.
     */
    CompletableFuture<Rows> pullPart(Route r, BatchPlan plan, int part, byte[] name, int dimension, PullFormat format) {
        int n = plan.partSize(part);
        if (!routing.fits(n, dimension)) {
            return pullCopy(plan.ids(part), name, dimension, format, 1, retry.start());
        }
        long expected = format.rowsBytes(n, dimension);
        return calls.call(r, plan.server(part), PsDescriptor.PULL,
                ClientCalls.bodyLength(PsDescriptor.pullBytes(name.length, n)),
                new PullRequest().set(r, plan, part, name, dimension, format))
                .thenApply(response -> new Rows(checkRows(response, expected, r, plan.server(part), n, dimension),
                        response, format))
                .exceptionallyCompose(failure -> {
                    long giveUpAt = retry.start();
                    return retry.retryable(failure, true, 0, giveUpAt)
                            ? retry.pause(failure, 0, r.addresses().get(plan.server(part)), plan.ids(part)[0], giveUpAt)
                                    .thenCompose(v -> pullCopy(plan.ids(part), name, dimension, format, 1, giveUpAt))
                            : CompletableFuture.failedFuture(failure);
                });
    }

    /**
     * A part's pull request on the fast path, encoded from the plan straight into the send buffer
     * (again on a resend). One thread's blocking pulls keep one per part and set it for each
     * batch, so that starting a part allocates no writer; the thread's plan and these are
     * replaced together after a failure, since a call that failed may still be encoded again.
     * An asynchronous pull makes one per part.
     */
    static final class PullRequest implements RequestWriter {
        private Route route;
        private BatchPlan plan;
        private int part;
        private byte[] name;
        private int dimension;
        private int count;
        private PullFormat format;

        /** Writes part {@code part} of {@code plan} from now on; returns this. */
        PullRequest set(Route r, BatchPlan plan, int part, byte[] name, int dimension, PullFormat format) {
            this.route = r;
            this.plan = plan;
            this.part = part;
            this.name = name;
            this.dimension = dimension;
            this.count = plan.partSize(part);
            this.format = format;
            return this;
        }

        @Override
        public void write(MemorySegment body) {
            int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, count, format.code());
            PsDescriptor.stamp(body, route.generation(), 0);
            plan.writeIds(part, body, at);
        }
    }

    /**
     * Starts a part's pull for a caller that waits on its own thread ({@link #awaitPull}): the
     * fast path's request, written by {@code request} (the thread's own for this part), with no
     * stage after the RPC's future, so the transport's thread only completes it and counts it in
     * {@code group}; the answer is checked on the waiting thread. Null when the part is above the
     * servers' request limits (then {@link #awaitPull} splits it).
     */
    CompletableFuture<RpcResponse> startPull(Route r, BatchPlan plan, int part, byte[] name, int dimension,
            PullFormat format, PullRequest request, CallGroup group) {
        int n = plan.partSize(part);
        if (!routing.fits(n, dimension)) {
            return null;
        }
        return calls.rawCall(r.addresses().get(plan.server(part)), PsDescriptor.PULL,
                ClientCalls.bodyLength(PsDescriptor.pullBytes(name.length, n)),
                request.set(r, plan, part, name, dimension, format), group);
    }

    /**
     * Waits for a part started by {@link #startPull}, scatters its rows into {@code out} (the
     * caller's {@code plan.count()} rows) unless {@code out} is null, and releases the answer. A
     * failure goes the way {@link #pullPart}'s does: mapped to the server's {@link PsException},
     * and a retryable one sent again by id, into the client's own copy, waited for here too.
     */
    void awaitPull(CompletableFuture<RpcResponse> started, Route r, BatchPlan plan, int part, byte[] name,
            int dimension, PullFormat format, float[] out) {
        if (started == null) {
            scatterCopy(ClientCalls.join(pullCopy(plan.ids(part), name, dimension, format, 1, retry.start())), plan,
                    part, dimension, out);
            return;
        }
        String address = r.addresses().get(plan.server(part));
        RpcResponse response;
        try {
            // The call's own deadline completes it; the margin only guards against a lost timer.
            response = started.get(longestWaitMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            Throwable failure = e instanceof ExecutionException ? ClientCalls.map(e.getCause(), address)
                    : lostTimer(started, address);
            long giveUpAt = retry.start();
            if (retry.retryable(failure, true, 0, giveUpAt)) {
                long[] ids = plan.ids(part);
                scatterCopy(ClientCalls.join(retry.pause(failure, 0, address, ids[0], giveUpAt)
                        .thenCompose(v -> pullCopy(ids, name, dimension, format, 1, giveUpAt))), plan, part, dimension,
                        out);
                return;
            }
            throw failure instanceof RuntimeException re ? re : new RpcException(String.valueOf(failure), failure);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            started.cancel(false);
            throw new RpcException("interrupted", e);
        }
        try (response) {
            int n = plan.partSize(part);
            long expected = format.rowsBytes(n, dimension);
            MemorySegment rows = response.segment();
            checkAnswer(rows, expected, r, plan.server(part), n, dimension);
            if (out != null) {
                scatter(plan, part, rows, format, dimension, out);
            }
        }
    }

    /** Scatters (unless {@code out} is null) and releases rows of the resilient path. */
    private static void scatterCopy(Rows rows, BatchPlan plan, int part, int dimension, float[] out) {
        try (rows) {
            if (out != null) {
                scatter(plan, part, rows.segment(), rows.format(), dimension, out);
            }
        }
    }

    /** Copies a part's rows in {@code format} into the caller's array, decoding them first if encoded. */
    private static void scatter(BatchPlan plan, int part, MemorySegment rows, PullFormat format, int dimension,
            float[] out) {
        if (format == PullFormat.F32) {
            plan.scatterRows(part, rows, dimension, out);
        } else {
            plan.scatterRows(part, MemorySegment.ofArray(decode(rows, format, plan.partSize(part), dimension)),
                    dimension, out);
        }
    }

    /** A call the RPC layer left pending past its deadline: cancelled, and failed as timed out. */
    private RpcTimeoutException lostTimer(CompletableFuture<RpcResponse> started, String address) {
        if (!started.cancel(false) && !started.isCompletedExceptionally()) {
            started.join().release(); // it completed just now
        }
        return new RpcTimeoutException(PsDescriptor.PULL.id(), address, retry.deadlineMillis(),
                "the call was not completed within " + LOST_TIMER_MARGIN_MILLIS + " ms past its deadline");
    }

    /** Pulls distinct ids into a copy of their rows (decoded to f32), in their order, retrying until {@code giveUpAt}. */
    private CompletableFuture<Rows> pullCopy(long[] ids, byte[] name, int dimension, PullFormat format, int attempt,
            long giveUpAt) {
        MemorySegment rows = MemorySegment.ofArray(new float[Math.multiplyExact(ids.length, dimension)]);
        return pullSome(ids, identity(ids.length), name, dimension, format, rows, attempt, giveUpAt)
                .thenApply(v -> new Rows(rows, null, PullFormat.F32));
    }

    /** Pulls {@code ids[positions[k]]} into row {@code positions[k]} of {@code rows} (f32), retrying by id. */
    private CompletableFuture<Void> pullSome(long[] ids, int[] positions, byte[] name, int dimension, PullFormat format,
            MemorySegment rows, int attempt, long giveUpAt) {
        Route r = routing.route();
        List<CompletableFuture<Void>> all = new ArrayList<>();
        long rowBytes = (long) dimension * Float.BYTES;
        for (int[] chunk : chunks(r, ids, positions, routing.chunkIds(dimension))) {
            int server = r.table().slots().serverOf(ids[chunk[0]]);
            int n = chunk.length;
            all.add(calls.call(r, server, PsDescriptor.PULL,
                    ClientCalls.bodyLength(PsDescriptor.pullBytes(name.length, n)), body -> {
                        int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, format.code());
                        PsDescriptor.stamp(body, r.generation(), 0);
                        for (int k = 0; k < n; k++) {
                            body.set(PsDescriptor.LONG, at + (long) k * Long.BYTES, ids[chunk[k]]);
                        }
                    }, retry.retryDeadlineMillis(giveUpAt)).thenAccept(response -> {
                        try (response) {
                            MemorySegment got = checkRows(response, format.rowsBytes(n, dimension), r, server, n,
                                    dimension);
                            long encodedRow = format.rowBytes(dimension);
                            for (int k = 0; k < n; k++) {
                                format.decodeRow(got, k * encodedRow, dimension, rows, chunk[k] * rowBytes);
                            }
                        }
                    }).exceptionallyCompose(failure -> retry.retryable(failure, true, attempt, giveUpAt)
                            ? retry.pause(failure, attempt, r.addresses().get(server), ids[chunk[0]], giveUpAt)
                                    .thenCompose(v -> pullSome(ids, chunk, name, dimension, format, rows, attempt + 1,
                                            giveUpAt))
                            : CompletableFuture.failedFuture(failure)));
        }
        return CompletableFuture.allOf(all.toArray(CompletableFuture<?>[]::new));
    }

    /** Checks a pull answer's size, notes its generation, and returns its rows. */
    private MemorySegment checkRows(RpcResponse response, long expected, Route r, int server, int n, int dimension) {
        MemorySegment segment = response.segment();
        try {
            checkAnswer(segment, expected, r, server, n, dimension);
        } catch (PsException e) {
            response.release();
            throw e;
        }
        return segment.asSlice(0, expected);
    }

    /** Checks that a pull answer holds {@code expected} bytes of rows and the trailer, and notes its generation. */
    private void checkAnswer(MemorySegment answer, long expected, Route r, int server, int n, int dimension) {
        if (answer.byteSize() != expected + PsDescriptor.GENERATION_TRAILER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "server " + r.addresses().get(server)
                    + " answered " + answer.byteSize() + " bytes for " + n + " encoded rows of dimension " + dimension
                    + "; expected " + (expected + PsDescriptor.GENERATION_TRAILER));
        }
        routing.observe(PsDescriptor.trailerGeneration(answer), r);
    }

    // ------------------------------------------------------------------------------------------
    // Push

    /**
     * Pushes part {@code part} of {@code lease}'s plan. The plan is read by this part's request
     * writer, on every send of the call, only while the lease lets it in; and by a retry (which
     * copies what it needs) before this part's future completes.
     */
    CompletableFuture<Void> pushPart(Route r, PushLease lease, int part, byte[] name, int dimension,
            MemorySegment grads) {
        BatchPlan plan = lease.plan;
        int n = plan.partSize(part);
        long dedupe = nextDedupeId();
        if (!routing.fits(n, dimension)) {
            return pushCopy(plan, part, name, dimension, grads, dedupe, 1, retry.start());
        }
        return calls.call(r, plan.server(part), PsDescriptor.PUSH,
                ClientCalls.bodyLength(PsDescriptor.pushBytes(name.length, n, dimension)), body -> {
                    if (!lease.enter()) {
                        throw PushLease.LATE; // a resend after the push ended: its call is complete
                    }
                    try {
                        int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
                        PsDescriptor.stamp(body, r.generation(), dedupe);
                        plan.writeIds(part, body, at);
                        plan.sumGradients(part, grads, dimension, body.asSlice(at + (long) n * Long.BYTES));
                    } finally {
                        lease.exit();
                    }
                }).thenAccept(response -> {
                    try (response) {
                        routing.observe(PsDescriptor.trailerGeneration(response.segment()), r);
                    }
                }).exceptionallyCompose(failure -> {
                    long giveUpAt = retry.start();
                    return retry.retryable(failure, false, 0, giveUpAt)
                            ? retry.pause(failure, 0, r.addresses().get(plan.server(part)), plan.ids(part)[0], giveUpAt)
                                    .thenCompose(v -> pushCopy(plan, part, name, dimension, grads, dedupe, 1, giveUpAt))
                            : CompletableFuture.failedFuture(failure);
                });
    }

    private CompletableFuture<Void> pushCopy(BatchPlan plan, int part, byte[] name, int dimension, MemorySegment grads,
            long dedupe, int attempt, long giveUpAt) {
        long[] ids = plan.ids(part);
        MemorySegment summed = MemorySegment.ofArray(new float[Math.multiplyExact(ids.length, dimension)]);
        plan.sumGradients(part, grads, dimension, summed);
        return pushSome(ids, identity(ids.length), name, dimension, summed, dedupe, attempt, giveUpAt);
    }

    /** Pushes row {@code positions[k]} of {@code grads} for {@code ids[positions[k]]}, retrying by id. */
    private CompletableFuture<Void> pushSome(long[] ids, int[] positions, byte[] name, int dimension, MemorySegment grads,
            long dedupe, int attempt, long giveUpAt) {
        Route r = routing.route();
        List<CompletableFuture<Void>> all = new ArrayList<>();
        long rowBytes = (long) dimension * Float.BYTES;
        for (int[] chunk : chunks(r, ids, positions, routing.chunkIds(dimension))) {
            int server = r.table().slots().serverOf(ids[chunk[0]]);
            int n = chunk.length;
            all.add(calls.call(r, server, PsDescriptor.PUSH,
                    ClientCalls.bodyLength(PsDescriptor.pushBytes(name.length, n, dimension)), body -> {
                        int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
                        PsDescriptor.stamp(body, r.generation(), dedupe);
                        long rowsAt = at + (long) n * Long.BYTES;
                        for (int k = 0; k < n; k++) {
                            body.set(PsDescriptor.LONG, at + (long) k * Long.BYTES, ids[chunk[k]]);
                            MemorySegment.copy(grads, chunk[k] * rowBytes, body, rowsAt + k * rowBytes, rowBytes);
                        }
                    }, retry.retryDeadlineMillis(giveUpAt)).thenAccept(response -> {
                        try (response) {
                            routing.observe(PsDescriptor.trailerGeneration(response.segment()), r);
                        }
                    }).exceptionallyCompose(failure -> retry.retryable(failure, false, attempt, giveUpAt)
                            ? retry.pause(failure, attempt, r.addresses().get(server), ids[chunk[0]], giveUpAt)
                                    .thenCompose(v -> pushSome(ids, chunk, name, dimension, grads, dedupe, attempt + 1,
                                            giveUpAt))
                            : CompletableFuture.failedFuture(failure)));
        }
        return CompletableFuture.allOf(all.toArray(CompletableFuture<?>[]::new));
    }

    private long nextDedupeId() {
        return Slots.mix(calls.rpc().clientId()) ^ pushSequence.incrementAndGet();
    }

    // ------------------------------------------------------------------------------------------
    // Splitting by server

    /** Groups positions by the server that owns their id, in chunks of at most {@code limit}. */
    private static List<int[]> chunks(Route r, long[] ids, int[] positions, int limit) {
        SlotTable slots = r.table().slots();
        int servers = slots.serverCount();
        int[] count = new int[servers];
        for (int p : positions) {
            count[slots.serverOf(ids[p])]++;
        }
        int[][] byServer = new int[servers][];
        for (int s = 0; s < servers; s++) {
            byServer[s] = new int[count[s]];
        }
        int[] filled = new int[servers];
        for (int p : positions) {
            int s = slots.serverOf(ids[p]);
            byServer[s][filled[s]++] = p;
        }
        List<int[]> chunks = new ArrayList<>();
        for (int[] list : byServer) {
            for (int from = 0; from < list.length; from += limit) {
                chunks.add(Arrays.copyOfRange(list, from, Math.min(list.length, from + limit)));
            }
        }
        return chunks;
    }

    private static int[] identity(int n) {
        int[] positions = new int[n];
        for (int i = 0; i < n; i++) {
            positions[i] = i;
        }
        return positions;
    }
}
