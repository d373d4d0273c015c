package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcHandler;
import dev.ferry.rpc.RpcServer;
import dev.ferry.rpc.ServerCall;
import dev.ferry.transport.TransportConfig;

/**
 * One parameter-server process on the wire: an {@link RpcServer} serving a
 * {@link ParameterServer} with the methods of {@link PsDescriptor}.
 *
 * <p>Zero-copy both ways: a pull gathers rows straight into the registered reply buffer
 * ({@link ServerCall#reply(int)}), and a push hands the optimizer a view of the registered
 * request buffer. Only the ids are copied, into a per-thread array, because the storage layer
 * takes them as a {@code long[]}.
 *
 * <p>Every request is checked whole before it touches a table: header, table, dimension, size
 * limits, exact length, and that every id's slot belongs to this server in the cluster's
 * {@link SlotTable}. A bad request is answered with a {@link PsException} code and changes
 * nothing.
 *
 * <p>The server owns the {@link RpcServer}, not the {@link ParameterServer}: closing it stops
 * serving and leaves the tables to their owner.
 */
public final class PsServer implements AutoCloseable {

    private static final ThreadLocal<long[][]> IDS = ThreadLocal.withInitial(() -> new long[][] {new long[1024]});

    private final ParameterServer ps;
    private final int index;
    private final SlotTable slots;
    private final Path checkpointDirectory;
    private final RpcServer rpc;

    private PsServer(ParameterServer ps, int index, int serverCount, Path checkpointDirectory, RpcConfig config,
            boolean inlinePulls) {
        this.ps = Objects.requireNonNull(ps, "ps");
        SlotTable restored = ps.slotTable();
        if (restored == null) {
            restored = SlotTable.balanced(serverCount);
            ps.slotTable(restored);
        } else if (restored.serverCount() != serverCount) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the checkpoint was written by a cluster of "
                    + restored.serverCount() + " servers; this one has " + serverCount);
        }
        if (index < 0 || index >= serverCount) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "server index " + index + " is outside [0, "
                    + serverCount + ")");
        }
        this.index = index;
        this.slots = restored;
        this.checkpointDirectory = checkpointDirectory;
        this.rpc = RpcServer.open(config)
                .register(inlinePulls ? PsDescriptor.PULL.inline() : PsDescriptor.PULL, guarded(this::pull))
                .register(PsDescriptor.PUSH, guarded(this::push))
                .register(PsDescriptor.DENSE_PULL, guarded(this::densePull))
                .register(PsDescriptor.DENSE_PUSH, guarded(this::densePush))
                .register(PsDescriptor.CREATE_TABLE, guarded(this::create))
                .register(PsDescriptor.DESCRIBE, guarded(this::describe))
                .register(PsDescriptor.SLOT_TABLE, guarded(this::slotTable))
                .register(PsDescriptor.CHECKPOINT, guarded(this::checkpoint));
    }

    /**
     * A server for {@code ps} as server {@code index} of {@code serverCount}. The slot table is the
     * one restored with {@code ps} from a checkpoint, else {@link SlotTable#balanced} (and recorded
     * in {@code ps}, so that checkpoints keep it).
     *
     * @param checkpointDirectory where {@code CHECKPOINT} writes; null refuses checkpoints
     * @throws PsException {@code INVALID_ARGUMENT} if the index is out of range or the restored slot
     *                     table is for another number of servers
     */
    public static PsServer open(ParameterServer ps, int index, int serverCount, Path checkpointDirectory,
            RpcConfig config) {
        return new PsServer(ps, index, serverCount, checkpointDirectory, config, false);
    }

    /**
     * {@link #open(ParameterServer, int, int, Path, RpcConfig)}, choosing where pulls run. With
     * {@code inlinePulls} a pull is served on the transport's own thread as it arrives (the
     * request is checked, the rows gathered into the reply buffer and the reply sent), without
     * the hand-off to a handler thread and back: two thread wake-ups less per pull, which is
     * most of a small pull's cost when threads outnumber cores. A gather holds one shard lock
     * at a time for a few row copies and never waits on I/O, so it suits the transport thread;
     * a server that takes large pushes on the same shards, or pulls of many thousands of rows,
     * may prefer handler threads (the default), which keep the transport polling meanwhile.
     * Pushes and every other method run on handler threads either way.
     */
    public static PsServer open(ParameterServer ps, int index, int serverCount, Path checkpointDirectory,
            RpcConfig config, boolean inlinePulls) {
        return new PsServer(ps, index, serverCount, checkpointDirectory, config, inlinePulls);
    }

    /** Listens on a transport; returns the address clients connect to. */
    public String listen(TransportConfig transport) {
        return rpc.listen(transport);
    }

    /** The tables it serves. */
    public ParameterServer parameterServer() {
        return ps;
    }

    /** Its index in the cluster. */
    public int index() {
        return index;
    }

    /** The RPC server beneath (counters, transports). */
    public RpcServer rpcServer() {
        return rpc;
    }

    /** Stops serving; the tables stay open. */
    @Override
    public void close() {
        rpc.close();
    }

    // ------------------------------------------------------------------------------------------
    // Handlers

    private static RpcHandler guarded(RpcHandler handler) {
        return call -> {
            try {
                handler.handle(call);
            } catch (PsException e) {
                throw PsDescriptor.toWire(e);
            }
        };
    }

    private void pull(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        String name = PsDescriptor.name(body);
        int dimension = PsDescriptor.dimension(body);
        int count = PsDescriptor.count(body);
        checkSparse(name, dimension);
        long rowBytes = checkCount(count, PsDescriptor.rowsBytes(count, Math.max(dimension, 0)));
        checkLength(body, PsDescriptor.pullBytes(PsDescriptor.nameLength(body), count), "PULL", count, dimension);
        long[] ids = readIds(body, count);
        checkOwned(ids, count);
        MemorySegment out = call.reply((int) rowBytes);
        ps.pull(name, dimension, ids, 0, count, out);
    }

    private void push(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        String name = PsDescriptor.name(body);
        int dimension = PsDescriptor.dimension(body);
        int count = PsDescriptor.count(body);
        checkSparse(name, dimension);
        long rowBytes = checkCount(count, PsDescriptor.rowsBytes(count, Math.max(dimension, 0)));
        int nameLength = PsDescriptor.nameLength(body);
        checkLength(body, PsDescriptor.pushBytes(nameLength, count, dimension), "PUSH", count, dimension);
        long[] ids = readIds(body, count);
        checkOwned(ids, count);
        ps.push(name, dimension, ids, 0, count, body.asSlice(PsDescriptor.pullBytes(nameLength, count), rowBytes));
    }

    private void densePull(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        DenseTensor tensor = checkDense(body);
        int count = PsDescriptor.count(body);
        long bytes = checkCount(count, (long) Math.max(count, 0) * Float.BYTES);
        checkLength(body, PsDescriptor.payloadOffset(PsDescriptor.nameLength(body)), "DENSE_PULL", count, 1);
        int offset = PsDescriptor.offset(body);
        if (offset < 0 || offset > tensor.config().length() - count) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "range [" + offset + ", +" + count
                    + ") is outside tensor '" + tensor.name() + "' of length " + tensor.config().length());
        }
        tensor.read(offset, count, call.reply((int) bytes));
    }

    private void densePush(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        DenseTensor tensor = checkDense(body);
        if (ps.readOnly()) {
            throw new PsException(PsException.Code.READ_ONLY, "this server is read-only (serving mode)");
        }
        int count = PsDescriptor.count(body);
        long bytes = checkCount(count, (long) Math.max(count, 0) * Float.BYTES);
        int at = PsDescriptor.payloadOffset(PsDescriptor.nameLength(body));
        checkLength(body, at + bytes, "DENSE_PUSH", count, 1);
        tensor.apply(body.asSlice(at, bytes));
    }

    private void create(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        if (PsDescriptor.kind(body) == PsDescriptor.DENSE) {
            dev.ferry.ps.DenseConfig config = PsDescriptor.readDense(body);
            checkDenseOwner(config.name());
            ps.createDense(config);
        } else if (PsDescriptor.kind(body) == PsDescriptor.SPARSE) {
            ps.createTable(PsDescriptor.readTable(body));
        } else {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "unknown table kind " + PsDescriptor.kind(body));
        }
    }

    private void describe(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        String only = PsDescriptor.nameLength(body) == 0 ? null : PsDescriptor.name(body);
        List<TableStats> stats = only == null ? ps.stats() : List.of(ps.describe(only));
        int bytes = PsDescriptor.SERVER_INFO;
        for (TableStats s : stats) {
            bytes += PsDescriptor.tableInfoBytes(s.name().getBytes(StandardCharsets.UTF_8).length);
        }
        MemorySegment out = call.reply(bytes);
        List<ServerInfo.Table> tables = stats.stream().map(s -> new ServerInfo.Table(isDense(s.name()), s)).toList();
        int at = PsDescriptor.writeServerInfo(out,
                new ServerInfo(null, index, slots.serverCount(), ps.readOnly(), slots.hashCode(), tables), slots.hashCode());
        for (ServerInfo.Table t : tables) {
            at = PsDescriptor.writeTableInfo(out, at, t.dense() ? PsDescriptor.DENSE : PsDescriptor.SPARSE, t.stats());
        }
    }

    private void slotTable(ServerCall call) {
        PsDescriptor.writeSlotTable(call.reply(PsDescriptor.slotTableBytes()), slots);
    }

    private void checkpoint(ServerCall call) {
        if (checkpointDirectory == null) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "server " + index
                    + " was started without a checkpoint directory");
        }
        byte[] path = ps.checkpoint(checkpointDirectory).toString().getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(path, 0, call.reply(path.length), java.lang.foreign.ValueLayout.JAVA_BYTE, 0, path.length);
    }

    // ------------------------------------------------------------------------------------------
    // Checks

    private boolean isDense(String name) {
        try {
            ps.dense(name);
            return true;
        } catch (PsException e) {
            return false;
        }
    }

    private void checkSparse(String name, int dimension) {
        SparseTable table = ps.table(name);
        if (dimension != table.dimension()) {
            throw new PsException(PsException.Code.WRONG_DIMENSION, "table '" + name + "' has dimension "
                    + table.dimension() + "; the request says " + dimension);
        }
    }

    private DenseTensor checkDense(MemorySegment body) {
        String name = PsDescriptor.name(body);
        DenseTensor tensor = ps.dense(name);
        int length = PsDescriptor.dimension(body);
        if (length != tensor.config().length()) {
            throw new PsException(PsException.Code.WRONG_DIMENSION, "tensor '" + name + "' has length "
                    + tensor.config().length() + "; the request says " + length);
        }
        return tensor;
    }

    private void checkDenseOwner(String name) {
        int owner = slots.serverOf(PsDescriptor.denseKey(name));
        if (owner != index) {
            throw new PsException(PsException.Code.WRONG_SERVER, "dense tensor '" + name + "' belongs to server "
                    + owner + ", not " + index);
        }
    }

    /** Checks a count against the limits; returns the payload bytes it stands for. */
    private long checkCount(int count, long payloadBytes) {
        if (count < 0) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "negative count " + count);
        }
        if (count > ps.config().maxIdsPerRequest() || payloadBytes > ps.config().maxRequestBytes()) {
            throw new PsException(PsException.Code.REQUEST_TOO_LARGE, "a request of " + count + " entries and "
                    + payloadBytes + " bytes of f32 exceeds the limits of " + ps.config().maxIdsPerRequest()
                    + " ids and " + ps.config().maxRequestBytes() + " bytes");
        }
        return payloadBytes;
    }

    private static void checkLength(MemorySegment body, long expected, String method, int count, int dimension) {
        if (body.byteSize() != expected) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a " + method + " of " + count
                    + " entries of dimension " + dimension + " takes " + expected + " bytes; the request has "
                    + body.byteSize());
        }
    }

    private static long[] readIds(MemorySegment body, int count) {
        long[][] holder = IDS.get();
        if (holder[0].length < count) {
            holder[0] = new long[Math.max(count, holder[0].length * 2)];
        }
        long[] ids = holder[0];
        MemorySegment.copy(body, PsDescriptor.LONG, PsDescriptor.payloadOffset(PsDescriptor.nameLength(body)), ids, 0,
                count);
        return ids;
    }

    private void checkOwned(long[] ids, int count) {
        for (int i = 0; i < count; i++) {
            int owner = slots.serverOfSlot(Slots.slotOf(ids[i]));
            if (owner != index) {
                throw new PsException(PsException.Code.WRONG_SERVER, "id " + ids[i] + " (slot " + Slots.slotOf(ids[i])
                        + ") belongs to server " + owner + ", not " + index + "; the client's slot table is not "
                        + "this cluster's");
            }
        }
    }
}
