package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.PeerUnavailableException;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcException;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.rpc.RpcTimeoutException;
import dev.ferry.transport.TransportConfig;

/**
 * The client of a parameter-server cluster: pull and push batches of ids, dense tensors, and
 * table management. Thread-safe; one per process is enough (all threads share its connections).
 *
 * <p>A batch goes through a {@link BatchPlan}: its ids are deduplicated, split by the server that
 * owns them in the cluster's {@link RoutingTable} (fetched from the servers at connect), sent to
 * all those servers in parallel, and the answers put back in the caller's order, duplicates
 * included. Pushes sum the gradients of duplicate ids into one row first, so a server applies
 * one optimizer step per distinct id per batch. A part above the servers' request limits is
 * split into several requests.
 *
 * <p>Routing follows the cluster: every request carries the table's generation, every answer
 * the server's. A newer generation in an answer refreshes the table in the background; a part
 * refused with {@code WRONG_SERVER} (nothing was applied) is sent again, by id, with the fresh
 * table, after a backoff ({@link #retryPolicy}); so is a part whose server is unavailable (and
 * a pull after a timeout). The table comes from the servers: clients never talk to ZooKeeper.
 *
 * <p>Zero-copy where the API allows: ids and summed gradients are encoded straight into the
 * registered send buffer; pulled rows are copied once, from the receive buffer into the
 * caller's array, or not at all with {@link #pullView}.
 *
 * <p>Errors: a request the servers refuse fails with a {@link PsException} carrying the server's
 * {@link PsException.Code} and naming the server; a server that cannot be reached in time fails
 * with the RPC layer's {@link RpcException}. Blocking methods throw them; asynchronous ones
 * complete their future with them. A batch split over several servers is not atomic: when one
 * part fails, the others may have been applied.
 */
public final class PsClient implements AutoCloseable {

    static {
        // Rows are copied between the wire (little-endian) and float[] as bytes.
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            throw new ExceptionInInitializerError("PsClient needs a little-endian platform");
        }
    }

    /** Attempts of one part of a batch before its failure surfaces (the first one included). */
    public static final int DEFAULT_ATTEMPTS = 40;
    /** The longest pause between two attempts; pauses double from 1 ms up to it. */
    public static final long DEFAULT_MAX_BACKOFF_MILLIS = 200;

    private final RpcClient rpc;
    private final List<String> bootstrap;
    private final ConcurrentHashMap<String, RpcChannel> channelsByAddress = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Integer> dimensions = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Integer> denseLengths = new ConcurrentHashMap<>();
    private final AtomicBoolean refreshing = new AtomicBoolean();
    private final AtomicLong pushSequence = new AtomicLong();
    private final AtomicInteger nextRefreshServer = new AtomicInteger();
    private final LongAdder retries = new LongAdder();
    private final LongAdder refreshes = new LongAdder();
    /** What the client routes by; replaced whole when a newer table arrives. */
    private volatile Route route;
    private volatile int maxIds = Integer.MAX_VALUE;
    private volatile long maxBytes = Long.MAX_VALUE;
    private volatile int attempts = DEFAULT_ATTEMPTS;
    private volatile long maxBackoffMillis = DEFAULT_MAX_BACKOFF_MILLIS;

    /**
     * A routing table and the addresses of its servers, in server order (the table's own in a
     * cluster run by a controller; the ones given to {@link #connect} in a fixed cluster).
     */
    private record Route(RoutingTable table, List<String> addresses) {
        long generation() {
            return table.generation();
        }
    }

    private PsClient(RpcClient rpc, List<String> bootstrap) {
        this.rpc = rpc;
        this.bootstrap = List.copyOf(bootstrap);
    }

    /**
     * Connects to a cluster through any of its servers and fetches the routing table.
     *
     * <p>Two kinds of cluster: a fixed one, where {@code addresses[i]} is server {@code i} (the
     * client checks that each server is the one its position says and that all enforce the same
     * slot table); and one run by a controller ({@code bin/ferry cluster}), where {@code addresses}
     * are only bootstrap servers: the table names every server, and the client follows it as it
     * changes (on {@code WRONG_SERVER} answers, and early from the generation every answer carries).
     *
     * @throws PsException  {@code INVALID_ARGUMENT} if the servers do not form that cluster
     * @throws RpcException if no server can be reached within the deadline
     */
    public static PsClient connect(RpcConfig config, TransportConfig transport, List<String> addresses) {
        Objects.requireNonNull(addresses, "addresses");
        if (addresses.isEmpty()) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "no server addresses");
        }
        RpcClient rpc = RpcClient.open(config, transport);
        try {
            PsClient client = new PsClient(rpc, addresses);
            RuntimeException last = null;
            for (String address : addresses) {
                try {
                    join(client.fetchRouting(address));
                    last = null;
                    break;
                } catch (RuntimeException e) {
                    last = e;
                }
            }
            if (last != null) {
                throw last;
            }
            if (client.route.table().members().isEmpty()) {
                client.route = new Route(client.route.table(), List.copyOf(addresses));
                client.checkFixed(addresses);
            }
            return client;
        } catch (RuntimeException e) {
            rpc.close();
            throw e;
        }
    }

    /**
     * {@link #connect(RpcConfig, TransportConfig, List)} with the addresses as one string:
     * comma-separated, optionally prefixed {@code ferry://} (the form {@code bin/ferry cluster
     * status} prints).
     */
    public static PsClient connect(RpcConfig config, TransportConfig transport, String cluster) {
        Objects.requireNonNull(cluster, "cluster");
        String list = cluster.startsWith("ferry://") ? cluster.substring("ferry://".length()) : cluster;
        List<String> addresses = new ArrayList<>();
        for (String a : list.split(",")) {
            if (!a.isBlank()) {
                addresses.add(a.strip());
            }
        }
        return connect(config, transport, addresses);
    }

    private void checkFixed(List<String> addresses) {
        SlotTable slots = route.table().slots();
        List<ServerInfo> infos = describeServers();
        for (int i = 0; i < infos.size(); i++) {
            ServerInfo info = infos.get(i);
            if (info.index() != i || info.serverCount() != addresses.size() || info.slotHash() != slots.hashCode()
                    || slots.serverCount() != addresses.size()) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "server " + addresses.get(i)
                        + " is server " + info.index() + " of " + info.serverCount()
                        + (info.slotHash() != slots.hashCode() ? " with another slot table" : "")
                        + "; the client was given it as server " + i + " of " + addresses.size());
            }
        }
    }

    /**
     * How often a part of a batch is tried before its failure surfaces, and the longest pause
     * between tries (they double from 1 ms). A part is retried after {@code WRONG_SERVER} (with a
     * fresh routing table) and when its server is unavailable; a pull also after a timeout. A
     * push is retried with the same dedupe id.
     */
    public PsClient retryPolicy(int maxAttempts, long maxBackoff) {
        if (maxAttempts < 1 || maxBackoff < 1) {
            throw new IllegalArgumentException("attempts and backoff must be >= 1: " + maxAttempts + ", " + maxBackoff);
        }
        this.attempts = maxAttempts;
        this.maxBackoffMillis = maxBackoff;
        return this;
    }

    /** The slot table the client routes with now. */
    public SlotTable slotTable() {
        return route.table().slots();
    }

    /** The routing table the client routes with now. */
    public RoutingTable routingTable() {
        return route.table();
    }

    /** The number of servers in the current routing table. */
    public int serverCount() {
        return route.addresses().size();
    }

    /** Parts of batches sent again after a refusal or an unavailable server, since connect. */
    public long retries() {
        return retries.sum();
    }

    /** Routing tables fetched since connect (the first one included). */
    public long refreshes() {
        return refreshes.sum();
    }

    /** The RPC client beneath (counters, transport). */
    public RpcClient rpcClient() {
        return rpc;
    }

    @Override
    public void close() {
        rpc.close();
    }

    // ------------------------------------------------------------------------------------------
    // Tables

    /**
     * Creates a sparse table on every server.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}, {@code INVALID_ARGUMENT}
     */
    public void createTable(TableConfig table) {
        join(createTableAsync(table));
    }

    /** {@link #createTable} without waiting. */
    public CompletableFuture<Void> createTableAsync(TableConfig table) {
        byte[] name = PsDescriptor.nameBytes(table.name());
        List<CompletableFuture<RpcResponse>> calls = new ArrayList<>();
        Route r = route;
        for (int s = 0; s < r.addresses().size(); s++) {
            calls.add(call(r, s, PsDescriptor.CREATE_TABLE, PsDescriptor.createBytes(name.length),
                    body -> PsDescriptor.writeCreate(body, name, table)));
        }
        return releaseAll(calls).thenRun(() -> dimensions.put(table.name(), table.dimension()));
    }

    /**
     * Creates a dense tensor on the server that owns its name.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}, {@code INVALID_ARGUMENT}
     */
    public void createDense(DenseConfig tensor) {
        byte[] name = PsDescriptor.nameBytes(tensor.name());
        Route r = route;
        join(releaseAll(List.of(call(r, denseOwner(r, tensor.name()), PsDescriptor.CREATE_TABLE,
                PsDescriptor.createBytes(name.length), body -> PsDescriptor.writeCreate(body, name, tensor)))));
        denseLengths.put(tensor.name(), tensor.length());
    }

    /**
     * A table's figures summed over the servers (rows, capacity, memory), or a dense tensor's.
     *
     * @throws PsException {@code UNKNOWN_TABLE}
     */
    public TableStats describe(String table) {
        byte[] name = PsDescriptor.nameBytes(table);
        TableStats sum = null;
        PsException unknown = null;
        for (CompletableFuture<ServerInfo> f : describeAll(name)) {
            ServerInfo info;
            try {
                info = join(f);
            } catch (PsException e) {
                // A dense tensor lives on one server; the others do not know it.
                if (e.code() != PsException.Code.UNKNOWN_TABLE) {
                    throw e;
                }
                unknown = e;
                continue;
            }
            for (ServerInfo.Table t : info.tables()) {
                TableStats s = t.stats();
                if (t.dense()) {
                    denseLengths.put(table, s.dimension());
                    return s;
                }
                sum = sum == null ? s : new TableStats(s.name(), s.dimension(), s.optimizer(), sum.rows() + s.rows(),
                        sum.capacityRows() + s.capacityRows(), s.bytesPerRow(), sum.reservedBytes() + s.reservedBytes());
            }
        }
        if (sum == null) {
            throw unknown != null ? unknown : new PsException(PsException.Code.UNKNOWN_TABLE, "no table '" + table + "'");
        }
        dimensions.put(table, sum.dimension());
        return sum;
    }

    /**
     * What every server says of itself and its tables, in server order. A dense tensor is
     * reported by its owner; asking the others for it by name would fail, so this lists all.
     */
    public List<ServerInfo> describeServers() {
        List<ServerInfo> infos = new ArrayList<>();
        for (CompletableFuture<ServerInfo> f : describeAll(new byte[0])) {
            infos.add(join(f));
        }
        return infos;
    }

    private List<CompletableFuture<ServerInfo>> describeAll(byte[] name) {
        List<CompletableFuture<ServerInfo>> all = new ArrayList<>();
        Route r = route;
        for (int s = 0; s < r.addresses().size(); s++) {
            String address = r.addresses().get(s);
            all.add(call(r, s, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
                    body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 0, 0, 0))
                    .thenApply(resp -> {
                        try (resp) {
                            return PsDescriptor.readDescribe(resp.segment(), address);
                        }
                    }));
        }
        return all;
    }

    /**
     * Writes a checkpoint on every server, each into its own checkpoint directory; returns the
     * directories written, in server order. Each server's checkpoint is a consistent cut of each
     * of its shards, not one global cut: pause pushes for that.
     */
    public List<String> checkpoint() {
        List<CompletableFuture<String>> all = new ArrayList<>();
        Route r = route;
        for (int s = 0; s < r.addresses().size(); s++) {
            all.add(call(r, s, PsDescriptor.CHECKPOINT, PsDescriptor.HEADER,
                    body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, new byte[0], 0, 0, 0))
                    .thenApply(resp -> {
                        try (resp) {
                            return new String(resp.segment().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                                    StandardCharsets.UTF_8);
                        }
                    }));
        }
        return all.stream().map(PsClient::join).toList();
    }

    // ------------------------------------------------------------------------------------------
    // Sparse pull and push

    /**
     * The rows of {@code ids}, flat: row {@code i} at {@code [i * dimension, (i + 1) * dimension)},
     * in the caller's order, duplicates repeated.
     */
    public float[] pull(String table, long[] ids) {
        return join(pullAsync(table, ids));
    }

    /**
     * Pulls the rows of {@code ids[offset, offset + count)} into the caller's array ({@code count}
     * rows of the table's dimension, in the batch's order) and waits for them. The rows are copied
     * out of the receive buffers on the calling thread, part by part as the servers answer, so the
     * transport's thread only hands the responses over: for callers that wait anyway, this keeps
     * the copy off the thread that every other call's completions go through.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if {@code out} is too short, or as {@link #pull}
     */
    public void pull(String table, long[] ids, int offset, int count, float[] out) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(out, "out");
        int dimension = join(dimension(table));
        if (out.length < (long) count * dimension) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; "
                    + count + " rows of dimension " + dimension + " need " + (long) count * dimension);
        }
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = route;
        BatchPlan plan = BatchPlan.of(ids, offset, count, r.table().slots());
        MemorySegment target = MemorySegment.ofArray(out);
        List<CompletableFuture<Rows>> parts = new ArrayList<>(plan.parts());
        for (int p = 0; p < plan.parts(); p++) {
            parts.add(pullPart(r, plan, p, name, dimension));
        }
        RuntimeException failure = null;
        for (int p = 0; p < parts.size(); p++) {
            Rows rows;
            try {
                rows = join(parts.get(p));
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
                continue;
            }
            try (rows) {
                if (failure == null) {
                    plan.scatterRows(p, rows.segment(), dimension, target);
                }
            }
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** {@link #pull} as one array per id. */
    public float[][] pullRows(String table, long[] ids) {
        float[] flat = pull(table, ids);
        int dimension = ids.length == 0 ? 0 : flat.length / ids.length;
        float[][] rows = new float[ids.length][];
        for (int i = 0; i < ids.length; i++) {
            rows[i] = java.util.Arrays.copyOfRange(flat, i * dimension, (i + 1) * dimension);
        }
        return rows;
    }

    /** {@link #pull} without waiting. */
    public CompletableFuture<float[]> pullAsync(String table, long[] ids) {
        Objects.requireNonNull(ids, "ids");
        return dimension(table).thenCompose(dimension -> {
            float[] out = new float[Math.multiplyExact(ids.length, dimension)];
            return pullInto(table, dimension, ids, MemorySegment.ofArray(out)).thenApply(v -> out);
        });
    }

    /**
     * Pulls into the caller's array, which must hold {@code ids.length * dimension} floats; for
     * callers that reuse their buffers.
     */
    public CompletableFuture<Void> pullAsync(String table, long[] ids, float[] out) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(out, "out");
        return dimension(table).thenCompose(dimension -> {
            if (out.length < (long) ids.length * dimension) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; "
                        + ids.length + " rows of dimension " + dimension + " need " + (long) ids.length * dimension);
            }
            return pullInto(table, dimension, ids, MemorySegment.ofArray(out));
        });
    }

    private CompletableFuture<Void> pullInto(String table, int dimension, long[] ids, MemorySegment out) {
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = route;
        BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
        CompletableFuture<?>[] parts = new CompletableFuture<?>[plan.parts()];
        for (int p = 0; p < parts.length; p++) {
            int part = p;
            parts[p] = pullPart(r, plan, part, name, dimension).thenAccept(rows -> {
                try (rows) {
                    plan.scatterRows(part, rows.segment(), dimension, out);
                }
            });
        }
        return CompletableFuture.allOf(parts);
    }

    /**
     * Pulls without copying the rows: the view hands out slices of the receive buffers, one per
     * caller position. Close it promptly; it holds the transport's receive buffers (its credits).
     * Parts that had to be split or retried are copied once, into the view's own memory.
     */
    public CompletableFuture<PullView> pullView(String table, long[] ids) {
        Objects.requireNonNull(ids, "ids");
        return dimension(table).thenCompose(dimension -> {
            byte[] name = PsDescriptor.nameBytes(table);
            Route r = route;
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
            List<CompletableFuture<Rows>> parts = new ArrayList<>();
            for (int p = 0; p < plan.parts(); p++) {
                parts.add(pullPart(r, plan, p, name, dimension));
            }
            return CompletableFuture.allOf(parts.toArray(CompletableFuture<?>[]::new)).handle((v, failure) -> {
                if (failure != null) {
                    releaseCompleted(parts);
                    throw failure instanceof CompletionException c ? c : new CompletionException(failure);
                }
                int[] partOf = new int[ids.length];
                int[] rowOf = new int[ids.length];
                plan.locate(partOf, rowOf);
                return new PullView(dimension, parts.stream().map(CompletableFuture::join).toList(), partOf, rowOf);
            });
        });
    }

    /**
     * Pushes one gradient row per id: {@code gradients} holds {@code ids.length * dimension} floats
     * in the order of the ids. Duplicate ids are summed (in f32, in the caller's order) into one step.
     */
    public void push(String table, long[] ids, float[] gradients) {
        join(pushAsync(table, ids, gradients));
    }

    /** {@link #push} without waiting. The arrays must not change until the future completes. */
    public CompletableFuture<Void> pushAsync(String table, long[] ids, float[] gradients) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(gradients, "gradients");
        return dimension(table).thenCompose(dimension -> {
            if (gradients.length != (long) ids.length * dimension) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, ids.length + " ids of table '" + table
                        + "' (dimension " + dimension + ") need " + (long) ids.length * dimension
                        + " gradient floats, not " + gradients.length);
            }
            FiniteGradients.check(table, ids, gradients, dimension);
            byte[] name = PsDescriptor.nameBytes(table);
            Route r = route;
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
            MemorySegment grads = MemorySegment.ofArray(gradients);
            CompletableFuture<?>[] parts = new CompletableFuture<?>[plan.parts()];
            for (int p = 0; p < plan.parts(); p++) {
                parts[p] = pushPart(r, plan, p, name, dimension, grads);
            }
            return CompletableFuture.allOf(parts);
        });
    }

    // ------------------------------------------------------------------------------------------
    // Parts: the fast path (one request per part, encoded straight from the plan) and the
    // resilient path (a part split to the request limits, or retried after a refusal, by id)

    /** Rows of a part: a view of a response (released on close) or the client's own copy. */
    record Rows(MemorySegment segment, RpcResponse response) implements AutoCloseable {
        @Override
        public void close() {
            if (response != null) {
                response.release();
            }
        }
    }

    private boolean fits(int count, int dimension) {
        return count <= maxIds && PsDescriptor.rowsBytes(count, dimension) <= maxBytes;
    }

    /** Ids per request under the servers' limits. */
    private int chunkIds(int dimension) {
        long byBytes = Math.max(1, maxBytes / ((long) dimension * Float.BYTES));
        return (int) Math.max(1, Math.min(maxIds, Math.min(byBytes, 1 << 20)));
    }

    private CompletableFuture<Rows> pullPart(Route r, BatchPlan plan, int part, byte[] name, int dimension) {
        int n = plan.partSize(part);
        if (!fits(n, dimension)) {
            return pullCopy(plan.ids(part), name, dimension, 1);
        }
        long expected = PsDescriptor.rowsBytes(n, dimension);
        return call(r, plan.server(part), PsDescriptor.PULL, bodyLength(PsDescriptor.pullBytes(name.length, n)), body -> {
            int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
            PsDescriptor.stamp(body, r.generation(), 0);
            plan.writeIds(part, body.asSlice(at));
        }).thenApply(response -> new Rows(checkRows(response, expected, r, plan.server(part), n, dimension), response))
                .exceptionallyCompose(failure -> retryable(failure, true, 0)
                        ? pause(failure, 0).thenCompose(v -> pullCopy(plan.ids(part), name, dimension, 1))
                        : CompletableFuture.failedFuture(failure));
    }

    /** Pulls distinct ids into a copy of their rows, in their order. */
    private CompletableFuture<Rows> pullCopy(long[] ids, byte[] name, int dimension, int attempt) {
        MemorySegment rows = MemorySegment.ofArray(new float[Math.multiplyExact(ids.length, dimension)]);
        return pullSome(ids, identity(ids.length), name, dimension, rows, attempt).thenApply(v -> new Rows(rows, null));
    }

    /** Pulls {@code ids[positions[k]]} into row {@code positions[k]} of {@code rows}, retrying by id. */
    private CompletableFuture<Void> pullSome(long[] ids, int[] positions, byte[] name, int dimension, MemorySegment rows,
            int attempt) {
        Route r = route;
        List<CompletableFuture<Void>> all = new ArrayList<>();
        long rowBytes = (long) dimension * Float.BYTES;
        for (int[] chunk : chunks(r, ids, positions, chunkIds(dimension))) {
            int server = r.table().slots().serverOf(ids[chunk[0]]);
            int n = chunk.length;
            all.add(call(r, server, PsDescriptor.PULL, bodyLength(PsDescriptor.pullBytes(name.length, n)), body -> {
                int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
                PsDescriptor.stamp(body, r.generation(), 0);
                for (int k = 0; k < n; k++) {
                    body.set(PsDescriptor.LONG, at + (long) k * Long.BYTES, ids[chunk[k]]);
                }
            }).thenAccept(response -> {
                try (response) {
                    MemorySegment got = checkRows(response, PsDescriptor.rowsBytes(n, dimension), r, server, n, dimension);
                    for (int k = 0; k < n; k++) {
                        MemorySegment.copy(got, k * rowBytes, rows, chunk[k] * rowBytes, rowBytes);
                    }
                }
            }).exceptionallyCompose(failure -> retryable(failure, true, attempt)
                    ? pause(failure, attempt).thenCompose(v -> pullSome(ids, chunk, name, dimension, rows, attempt + 1))
                    : CompletableFuture.failedFuture(failure)));
        }
        return CompletableFuture.allOf(all.toArray(CompletableFuture<?>[]::new));
    }

    private CompletableFuture<Void> pushPart(Route r, BatchPlan plan, int part, byte[] name, int dimension,
            MemorySegment grads) {
        int n = plan.partSize(part);
        long dedupe = nextDedupeId();
        if (!fits(n, dimension)) {
            return pushCopy(plan, part, name, dimension, grads, dedupe, 1);
        }
        return call(r, plan.server(part), PsDescriptor.PUSH,
                bodyLength(PsDescriptor.pushBytes(name.length, n, dimension)), body -> {
                    int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
                    PsDescriptor.stamp(body, r.generation(), dedupe);
                    plan.writeIds(part, body.asSlice(at));
                    plan.sumGradients(part, grads, dimension, body.asSlice(at + (long) n * Long.BYTES));
                }).thenAccept(response -> {
                    try (response) {
                        observe(PsDescriptor.trailerGeneration(response.segment()), r);
                    }
                }).exceptionallyCompose(failure -> retryable(failure, false, 0)
                        ? pause(failure, 0).thenCompose(v -> pushCopy(plan, part, name, dimension, grads, dedupe, 1))
                        : CompletableFuture.failedFuture(failure));
    }

    private CompletableFuture<Void> pushCopy(BatchPlan plan, int part, byte[] name, int dimension, MemorySegment grads,
            long dedupe, int attempt) {
        long[] ids = plan.ids(part);
        MemorySegment summed = MemorySegment.ofArray(new float[Math.multiplyExact(ids.length, dimension)]);
        plan.sumGradients(part, grads, dimension, summed);
        return pushSome(ids, identity(ids.length), name, dimension, summed, dedupe, attempt);
    }

    /** Pushes row {@code positions[k]} of {@code grads} for {@code ids[positions[k]]}, retrying by id. */
    private CompletableFuture<Void> pushSome(long[] ids, int[] positions, byte[] name, int dimension, MemorySegment grads,
            long dedupe, int attempt) {
        Route r = route;
        List<CompletableFuture<Void>> all = new ArrayList<>();
        long rowBytes = (long) dimension * Float.BYTES;
        for (int[] chunk : chunks(r, ids, positions, chunkIds(dimension))) {
            int server = r.table().slots().serverOf(ids[chunk[0]]);
            int n = chunk.length;
            all.add(call(r, server, PsDescriptor.PUSH, bodyLength(PsDescriptor.pushBytes(name.length, n, dimension)),
                    body -> {
                        int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, dimension, n, 0);
                        PsDescriptor.stamp(body, r.generation(), dedupe);
                        long rowsAt = at + (long) n * Long.BYTES;
                        for (int k = 0; k < n; k++) {
                            body.set(PsDescriptor.LONG, at + (long) k * Long.BYTES, ids[chunk[k]]);
                            MemorySegment.copy(grads, chunk[k] * rowBytes, body, rowsAt + k * rowBytes, rowBytes);
                        }
                    }).thenAccept(response -> {
                        try (response) {
                            observe(PsDescriptor.trailerGeneration(response.segment()), r);
                        }
                    }).exceptionallyCompose(failure -> retryable(failure, false, attempt)
                            ? pause(failure, attempt)
                                    .thenCompose(v -> pushSome(ids, chunk, name, dimension, grads, dedupe, attempt + 1))
                            : CompletableFuture.failedFuture(failure)));
        }
        return CompletableFuture.allOf(all.toArray(CompletableFuture<?>[]::new));
    }

    /** Checks a pull answer's size, notes its generation, and returns its rows. */
    private MemorySegment checkRows(RpcResponse response, long expected, Route r, int server, int n, int dimension) {
        MemorySegment segment = response.segment();
        if (segment.byteSize() != expected + PsDescriptor.GENERATION_TRAILER) {
            long got = segment.byteSize();
            response.release();
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "server " + r.addresses().get(server)
                    + " answered " + got + " bytes for " + n + " rows of dimension " + dimension + "; expected "
                    + (expected + PsDescriptor.GENERATION_TRAILER));
        }
        observe(PsDescriptor.trailerGeneration(segment), r);
        return segment.asSlice(0, expected);
    }

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
                chunks.add(java.util.Arrays.copyOfRange(list, from, Math.min(list.length, from + limit)));
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

    private long nextDedupeId() {
        return Slots.mix(rpc.clientId()) ^ pushSequence.incrementAndGet();
    }

    // ------------------------------------------------------------------------------------------
    // Routing: refusals, retries, refreshes

    /**
     * Whether a part that failed so is tried again: after {@code WRONG_SERVER} (nothing was
     * applied), or an unavailable server (gone or restarted; its rows are reassigned), and for a
     * pull also after a timeout. Never for a bad request.
     */
    private boolean retryable(Throwable failure, boolean idempotent, int attempt) {
        if (attempt + 1 >= attempts) {
            return false;
        }
        Throwable cause = unwrap(failure);
        if (cause instanceof PsException ps) {
            return ps.code() == PsException.Code.WRONG_SERVER;
        }
        return cause instanceof PeerUnavailableException || idempotent && cause instanceof RpcTimeoutException;
    }

    /** Waits the backoff of an attempt, then fetches a newer routing table if there is one. */
    private CompletableFuture<Void> pause(Throwable failure, int attempt) {
        retries.increment();
        long millis = Math.min(maxBackoffMillis, 1L << Math.min(attempt, 20));
        Throwable cause = unwrap(failure);
        long named = cause instanceof PsException ps ? PsDescriptor.wrongServerGeneration(ps) : -1;
        Executor later = CompletableFuture.delayedExecutor(millis, TimeUnit.MILLISECONDS);
        return CompletableFuture.runAsync(() -> { }, later).thenCompose(v -> {
            if (named >= 0 && named <= route.generation() && attempt == 0) {
                // The server is behind the client: give it time, keep the table.
                return CompletableFuture.completedFuture(null);
            }
            return refresh().handle((ok, refreshFailure) -> null);
        });
    }

    /** Notes a server's generation; a newer one than the route's starts one refresh in the background. */
    private void observe(long generation, Route r) {
        if (generation > r.generation() && generation > route.generation() && refreshing.compareAndSet(false, true)) {
            refresh().whenComplete((v, failure) -> refreshing.set(false));
        }
    }

    /**
     * Fetches the routing table from the servers in turn (those of the current table, then the
     * bootstrap ones) until one answers, and routes by it if it is newer. A fixed cluster keeps its
     * table.
     */
    private CompletableFuture<Void> refresh() {
        Route r = route;
        if (r.table().members().isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        List<String> candidates = new ArrayList<>(r.addresses());
        for (String b : bootstrap) {
            if (!candidates.contains(b)) {
                candidates.add(b);
            }
        }
        int first = Math.floorMod(nextRefreshServer.getAndIncrement(), candidates.size());
        CompletableFuture<Void> chain = CompletableFuture.failedFuture(new PsException(PsException.Code.WRONG_SERVER,
                "no server answered with a routing table"));
        for (int i = 0; i < candidates.size(); i++) {
            String address = candidates.get((first + i) % candidates.size());
            chain = chain.exceptionallyCompose(failure -> fetchRouting(address));
        }
        return chain;
    }

    /** Fetches the routing table and limits from one server and routes by it if it is newer. */
    private CompletableFuture<Void> fetchRouting(String address) {
        refreshes.increment();
        RpcChannel channel = channelsByAddress.computeIfAbsent(address, rpc::channel);
        return channel.call(PsDescriptor.ROUTING, PsDescriptor.HEADER,
                body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, new byte[0], 0, 0, 0))
                .exceptionallyCompose(failure -> CompletableFuture.failedFuture(map(failure, address)))
                .thenAccept(response -> {
                    try (response) {
                        MemorySegment in = response.segment();
                        long tableBytes = in.byteSize() - PsDescriptor.LIMITS;
                        if (tableBytes < 0) {
                            throw new PsException(PsException.Code.LENGTH_MISMATCH, "server " + address
                                    + " answered a routing table of " + in.byteSize() + " bytes");
                        }
                        RoutingTable table = RoutingTable.read(in.asSlice(0, tableBytes));
                        maxIds = in.get(PsDescriptor.INT, tableBytes);
                        maxBytes = in.get(PsDescriptor.LONG, tableBytes + 8);
                        install(table);
                    }
                });
    }

    private synchronized void install(RoutingTable table) {
        Route r = route;
        if (r == null || table.generation() > r.generation()) {
            route = new Route(table, table.members().isEmpty() && r != null ? r.addresses() : table.addresses());
        }
    }

    private static Throwable unwrap(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    // ------------------------------------------------------------------------------------------
    // Dense tensors

    /** The whole dense tensor. */
    public float[] pullDense(String tensor) {
        int length = denseLength(tensor);
        float[] out = new float[length];
        byte[] name = PsDescriptor.nameBytes(tensor);
        Route r = route;
        try (RpcResponse resp = join(call(r, denseOwner(r, tensor), PsDescriptor.DENSE_PULL,
                PsDescriptor.payloadOffset(name.length), body -> {
                    PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                    PsDescriptor.stamp(body, r.generation(), 0);
                }))) {
            if (resp.segment().byteSize() != (long) length * Float.BYTES) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + tensor + "' came back with "
                        + resp.segment().byteSize() + " bytes for " + length + " weights");
            }
            MemorySegment.copy(resp.segment(), 0, MemorySegment.ofArray(out), 0, (long) length * Float.BYTES);
        }
        return out;
    }

    /** One optimizer step on the whole dense tensor with {@code gradients} (its length). */
    public void pushDense(String tensor, float[] gradients) {
        int length = denseLength(tensor);
        if (gradients.length != length) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + tensor + "' has " + length
                    + " weights; got " + gradients.length + " gradients");
        }
        byte[] name = PsDescriptor.nameBytes(tensor);
        long bytes = (long) length * Float.BYTES;
        Route r = route;
        join(releaseAll(List.of(call(r, denseOwner(r, tensor), PsDescriptor.DENSE_PUSH,
                bodyLength(PsDescriptor.payloadOffset(name.length) + bytes), body -> {
                    int at = PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                    PsDescriptor.stamp(body, r.generation(), 0);
                    MemorySegment.copy(MemorySegment.ofArray(gradients), 0, body, at, bytes);
                }))));
    }

    private int denseLength(String tensor) {
        Integer length = denseLengths.get(tensor);
        if (length == null) {
            TableStats stats = describe(tensor);
            length = denseLengths.get(tensor);
            if (length == null) {
                throw new PsException(PsException.Code.UNKNOWN_TABLE, "'" + tensor + "' is a sparse table of dimension "
                        + stats.dimension() + ", not a dense tensor");
            }
        }
        return length;
    }

    private static int denseOwner(Route r, String tensor) {
        return r.table().slots().serverOf(PsDescriptor.denseKey(tensor));
    }

    // ------------------------------------------------------------------------------------------
    // Plumbing

    private CompletableFuture<Integer> dimension(String table) {
        Integer known = dimensions.get(table);
        if (known != null) {
            return CompletableFuture.completedFuture(known);
        }
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = route;
        return call(r, 0, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
                body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 0, 0, 0)).thenApply(resp -> {
                    ServerInfo info;
                    try (resp) {
                        info = PsDescriptor.readDescribe(resp.segment(), r.addresses().get(0));
                    }
                    for (ServerInfo.Table t : info.tables()) {
                        if (!t.dense() && t.stats().name().equals(table)) {
                            dimensions.put(table, t.stats().dimension());
                            return t.stats().dimension();
                        }
                    }
                    throw new PsException(PsException.Code.UNKNOWN_TABLE, "'" + table + "' is not a sparse table");
                });
    }

    /** A call to server {@code server} of a route whose failures are mapped to {@link PsException}s where they are the server's. */
    private CompletableFuture<RpcResponse> call(Route r, int server, RpcMethod method, int length, RequestWriter writer) {
        String address = r.addresses().get(server);
        RpcChannel channel = channelsByAddress.computeIfAbsent(address, rpc::channel);
        return channel.call(method, length, writer).exceptionallyCompose(
                failure -> CompletableFuture.failedFuture(map(failure, address)));
    }

    /** A call to server {@code server} of the current route (for tests that craft requests). */
    CompletableFuture<RpcResponse> call(int server, RpcMethod method, int length, RequestWriter writer) {
        return call(route, server, method, length, writer);
    }

    private static Throwable map(Throwable failure, String address) {
        Throwable cause = unwrap(failure);
        if (cause instanceof RemoteException remote) {
            PsException ps = PsDescriptor.toPsException(remote, address);
            if (ps != null) {
                return ps;
            }
        }
        return cause;
    }

    private static int bodyLength(long bytes) {
        if (bytes > Integer.MAX_VALUE) {
            throw new PsException(PsException.Code.REQUEST_TOO_LARGE, "a request of " + bytes
                    + " bytes is too large for one message; lower the server's request limits");
        }
        return (int) bytes;
    }

    /** Waits for every call, releases the responses, and fails with the first failure. */
    private static CompletableFuture<Void> releaseAll(List<CompletableFuture<RpcResponse>> calls) {
        CompletableFuture<?>[] released = new CompletableFuture<?>[calls.size()];
        for (int i = 0; i < released.length; i++) {
            released[i] = calls.get(i).thenAccept(RpcResponse::release);
        }
        return CompletableFuture.allOf(released);
    }

    private static void releaseCompleted(List<CompletableFuture<Rows>> parts) {
        for (CompletableFuture<Rows> f : parts) {
            if (f.isDone() && !f.isCompletedExceptionally()) {
                f.join().close();
            }
        }
    }

    /** The result of a future, its failure rethrown as the unchecked exception it is. */
    static <T> T join(CompletableFuture<T> future) {
        try {
            return future.get();
        } catch (ExecutionException e) {
            Throwable cause = unwrap(e.getCause());
            if (cause instanceof RuntimeException r) {
                throw r;
            }
            throw new RpcException(String.valueOf(cause), cause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            future.cancel(false);
            throw new RpcException("interrupted", e);
        }
    }

    /**
     * Rows of a pull as views of the receive buffers, in the caller's order: no copy. Valid until
     * {@link #close()}, which gives the buffers back to the transport.
     */
    public static final class PullView implements AutoCloseable {

        private final int dimension;
        private final List<Rows> parts;
        private final int[] partOf;
        private final int[] rowOf;
        private boolean closed;

        PullView(int dimension, List<Rows> parts, int[] partOf, int[] rowOf) {
            this.dimension = dimension;
            this.parts = parts;
            this.partOf = partOf;
            this.rowOf = rowOf;
        }

        /** Rows in the view (the caller's batch size). */
        public int count() {
            return partOf.length;
        }

        /** Floats per row. */
        public int dimension() {
            return dimension;
        }

        /** Row {@code i} of the caller's batch: {@code dimension} little-endian f32, read-only. */
        public MemorySegment row(int i) {
            if (closed) {
                throw new IllegalStateException("the view is closed");
            }
            long bytes = (long) dimension * Float.BYTES;
            return parts.get(partOf[i]).segment().asSlice(rowOf[i] * bytes, bytes).asReadOnly();
        }

        /** Element {@code j} of row {@code i}. */
        public float get(int i, int j) {
            return row(i).get(PsDescriptor.FLOAT, (long) j * Float.BYTES);
        }

        /** Releases the receive buffers; once. */
        @Override
        public void close() {
            if (!closed) {
                closed = true;
                parts.forEach(Rows::close);
            }
        }
    }
}
