package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
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
 * table, after a backoff ({@link #retryPolicy}); so is a part whose server is unavailable, and
 * a part that timed out: a pull always, a push in a cluster run by a controller, whose servers
 * dedupe a push by its id (a fixed cluster's do not, so a push that timed out there fails). The table comes from the servers: clients never talk to ZooKeeper.
 *
 * <p>Zero-copy where the API allows: ids and summed gradients are encoded straight into the
 * registered send buffer; pulled rows are copied once, from the receive buffer into the
 * caller's array, or not at all with {@link #pullView}. Rows may travel compressed
 * ({@link PullFormat}: f16, bf16, int8), by the table's default or per call, decoded into the
 * caller's array within the format's documented error.
 *
 * <p>The roles behind this API: {@code ClusterBootstrap} (the first routing table, the check of
 * a fixed cluster), {@code RoutingFollower} (the route and its refreshes), {@code RetryPolicy},
 * {@code SparseCalls} (a sparse batch planned, its parts started, the answers put back in order),
 * {@code BatchParts} (the per-server parts of a batch), {@code DenseCalls}, {@code TableDirectory}
 * (table metadata) and {@code ClientCalls} (channels and errors).
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
    /**
     * How long after its start an operation (a pull, a push, a dense call) stops retrying and
     * surfaces its last failure, unless two call deadlines are longer.
     */
    public static final long DEFAULT_RETRY_BUDGET_MILLIS = 60_000;

    private final ClientCalls servers;
    private final RoutingFollower routing;
    private final RetryPolicy retry;
    private final BatchParts batches;
    private final TableDirectory directory;
    private final DenseCalls dense;
    private final SparseCalls sparse;

    private PsClient(RpcClient rpc, List<String> bootstrap, long deadlineMillis) {
        this.servers = new ClientCalls(rpc);
        this.routing = new RoutingFollower(servers, bootstrap);
        this.retry = new RetryPolicy(routing, deadlineMillis);
        this.batches = new BatchParts(servers, routing, retry);
        this.directory = new TableDirectory(servers, routing);
        this.dense = new DenseCalls(servers, routing, directory, retry);
        this.sparse = new SparseCalls(routing, batches, directory);
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
     * <p>Cluster members that have joined but have no routing table yet are asked again until
     * the configuration's default deadline.
     *
     * @throws PsException  {@code INVALID_ARGUMENT} if the servers do not form that cluster;
     *                      {@code WRONG_SERVER} if none had a routing table within the deadline
     * @throws RpcException if no server can be reached within the deadline
     */
    public static PsClient connect(RpcConfig config, TransportConfig transport, List<String> addresses) {
        Objects.requireNonNull(addresses, "addresses");
        if (addresses.isEmpty()) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "no server addresses");
        }
        RpcClient rpc = RpcClient.open(config, transport);
        try {
            PsClient client = new PsClient(rpc, addresses, config.defaultDeadlineMillis());
            ClusterBootstrap.join(client.routing, client.directory, addresses, config.defaultDeadlineMillis());
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

    /**
     * How often a part of a batch is tried before its failure surfaces, and the longest pause
     * between tries (they double from 1 ms). A part is retried after {@code WRONG_SERVER} (with a
     * fresh routing table) and when its server is unavailable; a pull also after a timeout, and so
     * is a push in a cluster run by a controller (its servers apply a push id at most once). A
     * push is retried with the same dedupe id. After a timeout or an unavailable server, the
     * retry waits (up to one call deadline) for a newer routing table first: a dead server's
     * groups are handed to another once its session expires.
     */
    public PsClient retryPolicy(int maxAttempts, long maxBackoff) {
        return retryPolicy(maxAttempts, maxBackoff, retry.budgetMillis());
    }

    /**
     * {@link #retryPolicy(int, long)}, and the budget of one operation: no part of it is tried
     * again once {@code budgetMillis} have passed since the operation started, and a retry's
     * deadline is cut to what is left, so a blocking call returns or fails within about the
     * budget plus one call deadline, however many attempts remain (default
     * {@value #DEFAULT_RETRY_BUDGET_MILLIS} ms, or two call deadlines if longer).
     *
     * @throws IllegalArgumentException if any value is below 1
     */
    public PsClient retryPolicy(int maxAttempts, long maxBackoff, long budgetMillis) {
        retry.set(maxAttempts, maxBackoff, budgetMillis);
        return this;
    }

    static long defaultRetryBudgetMillis(long deadlineMillis) {
        return Math.max(DEFAULT_RETRY_BUDGET_MILLIS, 2 * deadlineMillis);
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
        return directory.createTableAsync(table);
    }

    /**
     * Creates a dense tensor on the server that owns its name.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}, {@code INVALID_ARGUMENT}
     */
    public void createDense(DenseConfig tensor) {
        dense.create(tensor);
    }

    /**
     * A table's figures summed over the servers (rows, capacity, memory), or a dense tensor's.
     *
     * @throws PsException {@code UNKNOWN_TABLE}
     */
    public TableStats describe(String table) {
        return directory.describe(table);
    }

    /**
     * What every server says of itself and its tables, in server order. A dense tensor is
     * reported by its owner; asking the others for it by name would fail, so this lists all.
     */
    public List<ServerInfo> describeServers() {
        return directory.describeServers();
    }

    /**
     * Writes a checkpoint on every server, each into its own checkpoint directory; returns the
     * directories written, in server order. Each server's checkpoint is a consistent cut of each
     * of its shards, not one global cut: pause pushes for that.
     */
    public List<String> checkpoint() {
        return directory.checkpoint();
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
     * {@link #pull(String, long[])} with the rows sent in {@code format} instead of the table's
     * default ({@link TableConfig#pullFormat()}), decoded into f32 within the format's error bound.
     */
    public float[] pull(String table, long[] ids, PullFormat format) {
        Objects.requireNonNull(format, "format");
        Objects.requireNonNull(ids, "ids");
        return join(directory.dimension(table).thenCompose(dimension -> {
            float[] out = new float[Math.multiplyExact(ids.length, dimension)];
            return sparse.pullInto(table, dimension, ids, MemorySegment.ofArray(out), format).thenApply(v -> out);
        }));
    }

    /**
     * Pulls the rows of {@code ids[offset, offset + count)} into the caller's array ({@code count}
     * rows of the table's dimension, in the batch's order) and waits for them. The rows are copied
     * out of the receive buffers on the calling thread, part by part as the servers answer, and
     * the answers are checked there too, so the transport's thread only completes each call and
     * wakes the caller: for callers that wait anyway, this keeps the work off the thread that every
     * other call's completions go through. The batch is planned in the thread's own plan, re-used
     * from batch to batch, so a pull allocates no plan.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if {@code out} is too short, or as {@link #pull}
     */
    public void pull(String table, long[] ids, int offset, int count, float[] out) {
        pull(table, ids, offset, count, out, null);
    }

    /**
     * {@link #pull(String, long[], int, int, float[])} with the rows sent in {@code format}
     * ({@code null}: the table's default).
     */
    public void pull(String table, long[] ids, int offset, int count, float[] out, PullFormat format) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(out, "out");
        sparse.pull(table, ids, offset, count, out, format);
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
        return directory.dimension(table).thenCompose(dimension -> {
            float[] out = new float[Math.multiplyExact(ids.length, dimension)];
            return sparse.pullInto(table, dimension, ids, MemorySegment.ofArray(out), null).thenApply(v -> out);
        });
    }

    /**
     * Pulls into the caller's array, which must hold {@code ids.length * dimension} floats; for
     * callers that reuse their buffers.
     */
    public CompletableFuture<Void> pullAsync(String table, long[] ids, float[] out) {
        return pullAsync(table, ids, out, null);
    }

    /** {@link #pullAsync(String, long[], float[])} with the rows sent in {@code format} ({@code null}: the table's default). */
    public CompletableFuture<Void> pullAsync(String table, long[] ids, float[] out, PullFormat format) {
        Objects.requireNonNull(ids, "ids");
        Objects.requireNonNull(out, "out");
        return directory.dimension(table).thenCompose(dimension -> {
            if (out.length < (long) ids.length * dimension) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "out holds " + out.length + " floats; "
                        + ids.length + " rows of dimension " + dimension + " need " + (long) ids.length * dimension);
            }
            return sparse.pullInto(table, dimension, ids, MemorySegment.ofArray(out), format);
        });
    }

    /**
     * Pulls without copying the rows: the view hands out slices of the receive buffers, one per
     * caller position. Close it promptly; it holds the transport's receive buffers (its credits).
     * Parts that had to be split or retried are copied once, into the view's own memory. Rows
     * come in f32 whatever the table's default pull format (a view is of the wire's bytes).
     */
    public CompletableFuture<PullView> pullView(String table, long[] ids) {
        Objects.requireNonNull(ids, "ids");
        return sparse.pullView(table, ids);
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
        return sparse.push(table, ids, gradients);
    }

    /** Plans of pushes that succeeded, idle until the next push; for tests. */
    int idlePushPlans() {
        return sparse.idlePushPlans();
    }

    // ------------------------------------------------------------------------------------------
    // Dense tensors

    /** The whole dense tensor. */
    public float[] pullDense(String tensor) {
        return dense.pull(tensor);
    }

    /** One optimizer step on the whole dense tensor with {@code gradients} (its length). */
    public void pushDense(String tensor, float[] gradients) {
        dense.push(tensor, gradients);
    }

    // ------------------------------------------------------------------------------------------
    // Plumbing

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
