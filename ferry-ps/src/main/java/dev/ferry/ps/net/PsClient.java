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

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcException;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
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

    private final ClientCalls servers;
    private final RoutingFollower routing;
    private final RetryPolicy retry;
    private final BatchParts batches;
    private final ConcurrentHashMap<String, Integer> dimensions = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Integer> denseLengths = new ConcurrentHashMap<>();

    private PsClient(RpcClient rpc, List<String> bootstrap) {
        this.servers = new ClientCalls(rpc);
        this.routing = new RoutingFollower(servers, bootstrap);
        this.retry = new RetryPolicy(routing);
        this.batches = new BatchParts(servers, routing, retry);
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
                    join(client.routing.fetchRouting(address));
                    last = null;
                    break;
                } catch (RuntimeException e) {
                    last = e;
                }
            }
            if (last != null) {
                throw last;
            }
            if (client.routing.route().table().members().isEmpty()) {
                client.routing.fixAddresses(addresses);
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
        SlotTable slots = routing.route().table().slots();
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
        retry.set(maxAttempts, maxBackoff);
        return this;
    }

    /** The slot table the client routes with now. */
    public SlotTable slotTable() {
        return routing.route().table().slots();
    }

    /** The routing table the client routes with now. */
    public RoutingTable routingTable() {
        return routing.route().table();
    }

    /** The number of servers in the current routing table. */
    public int serverCount() {
        return routing.route().addresses().size();
    }

    /** Parts of batches sent again after a refusal or an unavailable server, since connect. */
    public long retries() {
        return retry.retries();
    }

    /** Routing tables fetched since connect (the first one included). */
    public long refreshes() {
        return routing.refreshes();
    }

    /** The RPC client beneath (counters, transport). */
    public RpcClient rpcClient() {
        return servers.rpc();
    }

    @Override
    public void close() {
        servers.rpc().close();
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
        Route r = routing.route();
        for (int s = 0; s < r.addresses().size(); s++) {
            calls.add(servers.call(r, s, PsDescriptor.CREATE_TABLE, PsDescriptor.createBytes(name.length),
                    body -> PsDescriptor.writeCreate(body, name, table)));
        }
        return ClientCalls.releaseAll(calls).thenRun(() -> dimensions.put(table.name(), table.dimension()));
    }

    /**
     * Creates a dense tensor on the server that owns its name.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}, {@code INVALID_ARGUMENT}
     */
    public void createDense(DenseConfig tensor) {
        byte[] name = PsDescriptor.nameBytes(tensor.name());
        Route r = routing.route();
        join(ClientCalls.releaseAll(List.of(servers.call(r, denseOwner(r, tensor.name()), PsDescriptor.CREATE_TABLE,
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
        Route r = routing.route();
        for (int s = 0; s < r.addresses().size(); s++) {
            String address = r.addresses().get(s);
            all.add(servers.call(r, s, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
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
        Route r = routing.route();
        for (int s = 0; s < r.addresses().size(); s++) {
            all.add(servers.call(r, s, PsDescriptor.CHECKPOINT, PsDescriptor.HEADER,
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
        Route r = routing.route();
        BatchPlan plan = BatchPlan.of(ids, offset, count, r.table().slots());
        MemorySegment target = MemorySegment.ofArray(out);
        List<CompletableFuture<BatchParts.Rows>> parts = new ArrayList<>(plan.parts());
        for (int p = 0; p < plan.parts(); p++) {
            parts.add(batches.pullPart(r, plan, p, name, dimension));
        }
        RuntimeException failure = null;
        for (int p = 0; p < parts.size(); p++) {
            BatchParts.Rows rows;
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
        Route r = routing.route();
        BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
        CompletableFuture<?>[] parts = new CompletableFuture<?>[plan.parts()];
        for (int p = 0; p < parts.length; p++) {
            int part = p;
            parts[p] = batches.pullPart(r, plan, part, name, dimension).thenAccept(rows -> {
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
            Route r = routing.route();
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
            List<CompletableFuture<BatchParts.Rows>> parts = new ArrayList<>();
            for (int p = 0; p < plan.parts(); p++) {
                parts.add(batches.pullPart(r, plan, p, name, dimension));
            }
            return CompletableFuture.allOf(parts.toArray(CompletableFuture<?>[]::new)).handle((v, failure) -> {
                if (failure != null) {
                    BatchParts.releaseCompleted(parts);
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
            Route r = routing.route();
            BatchPlan plan = BatchPlan.of(ids, 0, ids.length, r.table().slots());
            MemorySegment grads = MemorySegment.ofArray(gradients);
            CompletableFuture<?>[] parts = new CompletableFuture<?>[plan.parts()];
            for (int p = 0; p < plan.parts(); p++) {
                parts[p] = batches.pushPart(r, plan, p, name, dimension, grads);
            }
            return CompletableFuture.allOf(parts);
        });
    }

    // ------------------------------------------------------------------------------------------
    // Dense tensors

    /** The whole dense tensor. */
    public float[] pullDense(String tensor) {
        int length = denseLength(tensor);
        float[] out = new float[length];
        byte[] name = PsDescriptor.nameBytes(tensor);
        Route r = routing.route();
        try (RpcResponse resp = join(servers.call(r, denseOwner(r, tensor), PsDescriptor.DENSE_PULL,
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
        Route r = routing.route();
        join(ClientCalls.releaseAll(List.of(servers.call(r, denseOwner(r, tensor), PsDescriptor.DENSE_PUSH,
                ClientCalls.bodyLength(PsDescriptor.payloadOffset(name.length) + bytes), body -> {
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
        Route r = routing.route();
        return servers.call(r, 0, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
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

    /** A call to server {@code server} of the current route (for tests that craft requests). */
    CompletableFuture<RpcResponse> call(int server, RpcMethod method, int length, RequestWriter writer) {
        return servers.call(routing.route(), server, method, length, writer);
    }

    /** The result of a future, its failure rethrown as the unchecked exception it is. */
    static <T> T join(CompletableFuture<T> future) {
        return ClientCalls.join(future);
    }

    /**
     * Rows of a pull as views of the receive buffers, in the caller's order: no copy. Valid until
     * {@link #close()}, which gives the buffers back to the transport.
     */
    public static final class PullView implements AutoCloseable {

        private final int dimension;
        private final List<BatchParts.Rows> parts;
        private final int[] partOf;
        private final int[] rowOf;
        private boolean closed;

        PullView(int dimension, List<BatchParts.Rows> parts, int[] partOf, int[] rowOf) {
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
                parts.forEach(BatchParts.Rows::close);
            }
        }
    }
}
