package dev.ferry.ps.net;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.PeerUnavailableException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.rpc.RpcTimeoutException;

/**
 * The tables of a cluster as the client knows them: created, described, and their dimensions
 * (sparse) and lengths (dense) remembered so that a batch needs no extra round trip. A server
 * that cannot be reached (dead, or restarted at another address) makes the client ask every
 * server for a newer routing table, so that the caller's next try goes where the cluster says:
 * these calls are not retried here (a create is not idempotent), and without the refresh a client
 * routed to a dead address would fail the same way for good. Thread-safe.
 */
final class TableDirectory {

    private final ClientCalls servers;
    private final RoutingFollower routing;
    private final ConcurrentHashMap<String, Integer> dimensions = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, Integer> denseLengths = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<String, PullFormat> pullFormats = new ConcurrentHashMap<>();

    TableDirectory(ClientCalls servers, RoutingFollower routing) {
        this.servers = servers;
        this.routing = routing;
    }

    /** A call to server {@code server} of {@code r}; one that fails unreached refreshes the routing table. */
    private CompletableFuture<RpcResponse> call(Route r, int server, RpcMethod method, int length,
            RequestWriter writer) {
        return servers.call(r, server, method, length, writer).whenComplete((v, failure) -> {
            Throwable cause = failure == null ? null : ClientCalls.unwrap(failure);
            if (cause instanceof PeerUnavailableException || cause instanceof RpcTimeoutException) {
                routing.refreshFromAll();
            }
        });
    }

    /** Creates a sparse table on every server and notes its dimension. */
    CompletableFuture<Void> createTableAsync(TableConfig table) {
        byte[] name = PsDescriptor.nameBytes(table.name());
        List<CompletableFuture<RpcResponse>> calls = new ArrayList<>();
        Route r = routing.route();
        for (int s = 0; s < r.addresses().size(); s++) {
            calls.add(call(r, s, PsDescriptor.CREATE_TABLE, PsDescriptor.createBytes(name.length),
                    body -> PsDescriptor.writeCreate(body, name, table)));
        }
        return ClientCalls.releaseAll(calls).thenRun(() -> {
            pullFormats.put(table.name(), table.pullFormat());
            dimensions.put(table.name(), table.dimension());
        });
    }

    /**
     * Creates a dense tensor on the server that owns its name.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}, {@code INVALID_ARGUMENT}
     */
    void createDense(DenseConfig tensor) {
        byte[] name = PsDescriptor.nameBytes(tensor.name());
        Route r = routing.route();
        ClientCalls.join(ClientCalls.releaseAll(List.of(call(r, denseOwner(r, tensor.name()), PsDescriptor.CREATE_TABLE,
                PsDescriptor.createBytes(name.length), body -> PsDescriptor.writeCreate(body, name, tensor)))));
        denseLengths.put(tensor.name(), tensor.length());
    }

    /**
     * A table's figures summed over the servers (rows, capacity, memory), or a dense tensor's.
     *
     * @throws PsException {@code UNKNOWN_TABLE}
     */
    TableStats describe(String table) {
        byte[] name = PsDescriptor.nameBytes(table);
        TableStats sum = null;
        PsException unknown = null;
        for (CompletableFuture<ServerInfo> f : describeAll(name)) {
            ServerInfo info;
            try {
                info = ClientCalls.join(f);
            } catch (PsException e) {
                // A dense tensor lives on its owner (and backups); the others do not know it.
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
                pullFormats.put(table, t.pullFormat());
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
     * reported by its owner and its backups; asking the others for it by name would fail, so
     * this lists all.
     */
    List<ServerInfo> describeServers() {
        List<ServerInfo> infos = new ArrayList<>();
        for (CompletableFuture<ServerInfo> f : describeAll(new byte[0])) {
            infos.add(ClientCalls.join(f));
        }
        return infos;
    }

    private List<CompletableFuture<ServerInfo>> describeAll(byte[] name) {
        List<CompletableFuture<ServerInfo>> all = new ArrayList<>();
        Route r = routing.route();
        for (int s = 0; s < r.addresses().size(); s++) {
            String address = r.addresses().get(s);
            all.add(call(r, s, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
                    body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 0, 0, 0))
                    .thenApply(resp -> {
                        try (resp) {
                            return DescribeDescriptor.readDescribe(resp.segment(), address);
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
    List<String> checkpoint() {
        List<CompletableFuture<String>> all = new ArrayList<>();
        Route r = routing.route();
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
        return all.stream().map(ClientCalls::join).toList();
    }

    /** The dimension of a sparse table this client knows already, or -1 (then ask {@link #dimension}). */
    int knownDimension(String table) {
        Integer known = dimensions.get(table);
        return known == null ? -1 : known;
    }

    /** A sparse table's dimension: known since it was created or described, else asked of server 0. */
    CompletableFuture<Integer> dimension(String table) {
        int known = knownDimension(table);
        if (known >= 0) {
            return CompletableFuture.completedFuture(known);
        }
        byte[] name = PsDescriptor.nameBytes(table);
        Route r = routing.route();
        return call(r, 0, PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(name.length),
                body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 0, 0, 0)).thenApply(resp -> {
                    ServerInfo info;
                    try (resp) {
                        info = DescribeDescriptor.readDescribe(resp.segment(), r.addresses().get(0));
                    }
                    for (ServerInfo.Table t : info.tables()) {
                        if (!t.dense() && t.stats().name().equals(table)) {
                            pullFormats.put(table, t.pullFormat());
                            dimensions.put(table, t.stats().dimension());
                            return t.stats().dimension();
                        }
                    }
                    throw new PsException(PsException.Code.UNKNOWN_TABLE, "'" + table + "' is not a sparse table");
                });
    }

    /** A dense tensor's length, described if not known yet. */
    int denseLength(String tensor) {
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

    /** The server that holds a dense tensor. */
    static int denseOwner(Route r, String tensor) {
        return r.table().slots().serverOf(PsDescriptor.denseKey(tensor));
    }


    /** A sparse table's default pull format, known once its dimension is ({@link #dimension}); f32 if not. */
    PullFormat pullFormat(String table) {
        return pullFormats.getOrDefault(table, PullFormat.F32);
    }
}
