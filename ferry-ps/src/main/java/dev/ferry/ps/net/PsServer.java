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
    private final String memberId;
    private final Path checkpointDirectory;
    private final RpcServer rpc;
    private final MoveSource moveSource;
    private final MoveTarget moveTarget;
    private final Replicator replicator;
    private final ReplicaApplier replicaApplier;
    private final ServingGate gate = new ServingGate();
    private volatile TransportConfig transport;
    private volatile java.util.function.Consumer<dev.ferry.ps.TableConfig> onTableCreated = config -> { };
    /** The routing table enforced and this server's index in it; replaced whole by {@link #install}. */
    private volatile View view;

    /**
     * A routing table, this server's place in it ({@code self} -1: it owns nothing), and the
     * groups' replicas at the same generation (null: no replication).
     */
    record View(RoutingTable table, int self, Replicas replicas) {
        long generation() {
            return table == null ? -1 : table.generation();
        }
    }

    private PsServer(ParameterServer ps, String memberId, Path checkpointDirectory, RpcConfig config,
            boolean inlinePulls) {
        this.ps = Objects.requireNonNull(ps, "ps");
        this.memberId = Objects.requireNonNull(memberId, "memberId");
        this.view = new View(null, -1, null);
        this.checkpointDirectory = checkpointDirectory;
        DedupeWindow window = new DedupeWindow();
        this.moveSource = new MoveSource(ps, this, config, window);
        this.moveTarget = new MoveTarget(ps, this, window);
        this.replicator = new Replicator(ps, this, config, () -> transport, window);
        this.replicaApplier = new ReplicaApplier(ps, this, moveTarget, window);
        this.rpc = register(RpcServer.open(config), inlinePulls);
    }

    private PsServer(ParameterServer ps, int index, int serverCount, Path checkpointDirectory, RpcConfig config,
            boolean inlinePulls) {
        this.ps = Objects.requireNonNull(ps, "ps");
        this.memberId = null;
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
        this.view = new View(RoutingTable.fixed(restored), index, null);
        this.checkpointDirectory = checkpointDirectory;
        DedupeWindow window = new DedupeWindow();
        this.moveSource = new MoveSource(ps, this, config, window);
        this.moveTarget = new MoveTarget(ps, this, window);
        this.replicator = new Replicator(ps, this, config, () -> transport, window);
        this.replicaApplier = new ReplicaApplier(ps, this, moveTarget, window);
        this.rpc = register(RpcServer.open(config), inlinePulls);
    }

    private RpcServer register(RpcServer server, boolean inlinePulls) {
        return server
                .register(inlinePulls ? PsDescriptor.PULL.inline() : PsDescriptor.PULL, guarded(this::pull))
                .register(PsDescriptor.PUSH, guarded(this::push))
                .register(PsDescriptor.DENSE_PULL, guarded(this::densePull))
                .register(PsDescriptor.DENSE_PUSH, guarded(this::densePush))
                .register(PsDescriptor.CREATE_TABLE, guarded(this::create))
                .register(PsDescriptor.DESCRIBE, guarded(this::describe))
                .register(PsDescriptor.SLOT_TABLE, guarded(this::slotTable))
                .register(PsDescriptor.CHECKPOINT, guarded(this::checkpoint))
                .register(PsDescriptor.ROUTING, guarded(this::routing))
                .register(PsDescriptor.MOVE_BEGIN, guarded(call -> moveTarget.begin(call)))
                .register(PsDescriptor.MOVE_ROWS, guarded(call -> moveTarget.rows(call)))
                .register(ReplicationDescriptor.REPLICATE.inline(), guarded(replicaApplier::receive))
                .register(DenseReplication.REPLICATE_DENSE.inline(), guarded(replicaApplier::receiveDense))
                .register(ReplicationDescriptor.MOVE_DEDUPE, guarded(call -> moveTarget.dedupe(call)))
                .register(DenseMove.MOVE_DENSE, guarded(call -> moveTarget.dense(call)));
    }

    /**
     * A server for {@code ps} as member {@code memberId} of a cluster run by a controller: it owns
     * nothing (answers {@code WRONG_SERVER}) until {@link #install} gives it a table naming it.
     */
    public static PsServer openMember(ParameterServer ps, String memberId, Path checkpointDirectory, RpcConfig config,
            boolean inlinePulls) {
        return new PsServer(ps, memberId, checkpointDirectory, config, inlinePulls);
    }

    /**
     * Enforces a newer routing table from now on (an older or equal generation is ignored); for
     * a member server only. Requests already checked against the old one finish.
     *
     * @return whether the table was installed
     */
    public boolean install(RoutingTable table) {
        return install(table, null);
    }

    /**
     * {@link #install(RoutingTable)} with the groups' replicas at the same generation (null: no
     * replication): from then on a push is acknowledged only once every in-sync backup of its
     * groups applied it ({@link Replicator}), and backups take replicated rows only from the
     * primary of the epoch named here ({@link ReplicaApplier}).
     *
     * @return whether the table was installed
     */
    public synchronized boolean install(RoutingTable table, Replicas replicas) {
        Objects.requireNonNull(table, "table");
        if (replicas != null && replicas.generation() != table.generation()) {
            throw new IllegalArgumentException("replicas of generation " + replicas.generation() + " for a table of "
                    + table.generation());
        }
        if (memberId == null) {
            throw new IllegalStateException("a fixed cluster's server keeps its slot table");
        }
        if (table.generation() <= view.generation()) {
            return false;
        }
        moveTarget.fence.writeLock().lock();
        try {
            view = new View(table, table.indexOf(memberId), replicas);
        } finally {
            moveTarget.fence.writeLock().unlock();
        }
        return true;
    }

    /**
     * Moves slot groups to the member at {@code targetAddress} while serving them: readies it,
     * then sends a snapshot of the groups' rows; returns when all are there. From then on every
     * push on those groups is copied there before it is acknowledged, until {@link #endMove}:
     * the controller flips the ownership, and both servers install the new table. Blocking.
     *
     * @throws PsException or an RPC exception if the target refused or could not be reached
     *                     (the move is ended here then)
     */
    public void moveOut(long moveId, int[] groups, String targetAddress) {
        moveSource.run(moveId, groups.clone(), targetAddress, transport);
    }

    /**
     * {@link #moveOut(long, int[], String)} for a move or a {@code copy} (a new backup of the
     * groups, not a new owner): both carry the groups' sparse rows and dense tensors, and the
     * dedupe ids; a copy's target then gets every push by replication.
     */
    public void moveOut(long moveId, int[] groups, String targetAddress, boolean copy) {
        moveSource.run(moveId, groups.clone(), targetAddress, transport);
    }

    /** Ends move {@code moveId} on this server, whichever end it is (flipped or cancelled). */
    public void endMove(long moveId) {
        moveSource.end(moveId);
        moveTarget.end(moveId);
    }

    /**
     * Called after each sparse table a client creates here (so that a cluster records it for the
     * servers that join later); on the handler thread.
     */
    public void onTableCreated(java.util.function.Consumer<dev.ferry.ps.TableConfig> listener) {
        this.onTableCreated = Objects.requireNonNull(listener, "listener");
    }

    /** The id of the move this server is sending, or -1. */
    public long movingOut() {
        return moveSource.moving();
    }

    /** The routing table enforced now (null for a member before its first table). */
    public RoutingTable routingTable() {
        return view.table();
    }

    /**
     * Replication settings: a backup that does not answer a push's rows within
     * {@code timeoutMillis} is reported to {@code reporter} (the controller then removes it from
     * the in-sync set, and the push is acknowledged without it).
     */
    public void replication(long timeoutMillis, InSyncReporter reporter) {
        replicator.configure(timeoutMillis, reporter);
    }

    /** Whether this server serves (closed by its cluster membership when cut off from coordination). */
    public ServingGate gate() {
        return gate;
    }

    /** The view enforced now: table, own index, replicas. */
    View view() {
        return view;
    }

    /** The member id (null in a fixed cluster). */
    public String memberId() {
        return memberId;
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
        if (this.transport == null) {
            this.transport = transport;
        }
        return rpc.listen(transport);
    }

    /**
     * {@link #listen(TransportConfig)} through {@code opener} (a benchmark's counting one); the
     * first transport is also the one it reaches its backups and move targets on.
     */
    public String listen(TransportConfig transport, dev.ferry.rpc.TransportOpener opener) {
        if (this.transport == null) {
            this.transport = transport;
        }
        return rpc.listen(transport, opener);
    }

    /** The tables it serves. */
    public ParameterServer parameterServer() {
        return ps;
    }

    /** Its index in the current routing table (-1 for a member that owns nothing yet). */
    public int index() {
        return view.self();
    }

    /** The RPC server beneath (counters, transports). */
    public RpcServer rpcServer() {
        return rpc;
    }

    /** Stops serving; the tables stay open. */
    @Override
    public void close() {
        rpc.close();
        moveSource.close();
        replicator.close();
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
        View v = checkOwned(ids, count, PsDescriptor.generation(body));
        dev.ferry.ps.PullFormat format = dev.ferry.ps.PullFormat.ofCode(PsDescriptor.offset(body));
        long replyBytes = format.rowsBytes(count, dimension);
        MemorySegment out = call.reply((int) replyBytes + PsDescriptor.GENERATION_TRAILER);
        PullEncoder.pull(ps, name, dimension, ids, count, format, out);
        out.set(PsDescriptor.LONG, replyBytes, v.generation());
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
        // From the ownership check to the forward: a move starting waits (MoveSource).
        moveSource.barrier.readLock().lock();
        View v;
        try {
            v = checkOwned(ids, count, PsDescriptor.generation(body));
            gate.checkPushes(v.generation());
            MemorySegment gradients = body.asSlice(PsDescriptor.pullBytes(nameLength, count), rowBytes);
            long dedupe = PsDescriptor.dedupeId(body);
            if (v.replicas() == null) {
                applyPush(name, dimension, ids, count, gradients, call.remainingMillis(), dedupe);
            } else {
                replicator.push(v, name, dimension, ids, count, gradients, dedupe, call.remainingMillis(),
                        (is, n, gs, left) -> applyPush(name, dimension, is, n, gs, left, dedupe));
            }
        } finally {
            moveSource.barrier.readLock().unlock();
        }
        call.reply(PsDescriptor.GENERATION_TRAILER).set(PsDescriptor.LONG, 0, v.generation());
    }

    private void applyPush(String name, int dimension, long[] ids, int count, MemorySegment gradients, long millis,
            long dedupe) {
        if (!moveSource.pushMoving(name, dimension, ids, count, gradients, millis, dedupe)) {
            ps.push(name, dimension, ids, 0, count, gradients);
        }
    }

    /** Whether {@code group} is in the move this server is sending. */
    boolean movingOut(int group) {
        return moveSource.movingGroup(group);
    }

    /** A deduped retry's ids: a move's target must still see it ({@link MoveSource#resendMoving}). */
    void resendMoving(String name, long[] ids, int count, long millis, long dedupe) {
        moveSource.resendMoving(name, ids, count, millis, dedupe);
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
        checkDenseOwned(tensor.name(), PsDescriptor.generation(body));
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
        // As a sparse push: from the ownership check to the forward, a move starting waits.
        moveSource.barrier.readLock().lock();
        try {
            View v = checkDenseOwned(tensor.name(), PsDescriptor.generation(body));
            gate.checkPushes(v.generation());
            MemorySegment gradients = body.asSlice(at, bytes);
            long dedupe = PsDescriptor.dedupeId(body);
            if (v.replicas() == null) {
                moveSource.pushDense(tensor, gradients, call.remainingMillis(), dedupe);
            } else {
                replicator.pushDense(v, tensor, dedupe, call.remainingMillis(),
                        left -> moveSource.pushDense(tensor, gradients, left, dedupe));
            }
        } finally {
            moveSource.barrier.readLock().unlock();
        }
    }

    private void create(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        if (PsDescriptor.kind(body) == PsDescriptor.DENSE) {
            dev.ferry.ps.DenseConfig config = PsDescriptor.readDense(body);
            moveSource.barrier.readLock().lock();
            try {
                View v = checkDenseOwner(config.name());
                DenseTensor tensor;
                try {
                    tensor = ps.createDense(config);
                } catch (PsException e) {
                    if (memberId == null || e.code() != PsException.Code.TABLE_EXISTS || !sameDense(config)) {
                        throw e;
                    }
                    // A client's retry after a lost answer (its creation may not have reached the backups).
                    tensor = ps.dense(config.name());
                }
                moveSource.createdDense(tensor, call.remainingMillis());
                if (v.replicas() != null) {
                    replicator.createdDense(v, tensor, call.remainingMillis());
                }
            } finally {
                moveSource.barrier.readLock().unlock();
            }
        } else if (PsDescriptor.kind(body) == PsDescriptor.SPARSE) {
            dev.ferry.ps.TableConfig config = PsDescriptor.readTable(body);
            if (memberId != null && sameTable(config)) {
                return; // a cluster's members copy tables from each other: the same one again is no error
            }
            try {
                ps.createTable(config);
            } catch (PsException e) {
                if (memberId != null && e.code() == PsException.Code.TABLE_EXISTS && sameTable(config)) {
                    return; // copied from another member meanwhile
                }
                throw e;
            }
            onTableCreated.accept(config);
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
        List<ServerInfo.Table> tables = stats.stream().map(s -> isDense(s.name()) ? new ServerInfo.Table(true, s)
                : new ServerInfo.Table(false, s, ps.table(s.name()).config().pullFormat())).toList();
        View v = view;
        int servers = v.table() == null ? 0 : v.table().serverCount();
        int hash = v.table() == null ? 0 : v.table().slots().hashCode();
        int at = PsDescriptor.writeServerInfo(out,
                new ServerInfo(null, v.self(), servers, ps.readOnly(), hash, tables), hash);
        for (ServerInfo.Table t : tables) {
            at = PsDescriptor.writeTableInfo(out, at, t.dense() ? PsDescriptor.DENSE : PsDescriptor.SPARSE, t.stats(),
                    t.pullFormat());
        }
    }

    private void slotTable(ServerCall call) {
        View v = view;
        if (v.table() == null) {
            throw PsDescriptor.wrongServer(v.generation(), "member " + memberId + " has no routing table yet");
        }
        PsDescriptor.writeSlotTable(call.reply(PsDescriptor.slotTableBytes()), v.table().slots());
    }

    private void routing(ServerCall call) {
        View v = view;
        if (v.table() == null) {
            throw PsDescriptor.wrongServer(v.generation(), "member " + memberId + " has no routing table yet");
        }
        int bytes = v.table().wireBytes();
        MemorySegment out = call.reply(bytes + PsDescriptor.LIMITS);
        v.table().write(out);
        out.set(PsDescriptor.INT, bytes, ps.config().maxIdsPerRequest());
        out.set(PsDescriptor.INT, bytes + 4, 0);
        out.set(PsDescriptor.LONG, bytes + 8, ps.config().maxRequestBytes());
    }

    /** Where {@code CHECKPOINT} writes this server's checkpoints, or null if it refuses them. */
    public Path checkpointDirectory() {
        return checkpointDirectory;
    }

    private void checkpoint(ServerCall call) {
        if (checkpointDirectory == null) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "server " + view.self()
                    + " was started without a checkpoint directory");
        }
        byte[] path = ps.checkpoint(checkpointDirectory).toString().getBytes(StandardCharsets.UTF_8);
        MemorySegment.copy(path, 0, call.reply(path.length), java.lang.foreign.ValueLayout.JAVA_BYTE, 0, path.length);
    }

    // ------------------------------------------------------------------------------------------
    // Checks

    private boolean sameTable(dev.ferry.ps.TableConfig config) {
        try {
            return ps.table(config.name()).config().equals(config);
        } catch (PsException unknown) {
            return false;
        }
    }

    private boolean sameDense(dev.ferry.ps.DenseConfig config) {
        try {
            return ps.dense(config.name()).config().equals(config);
        } catch (PsException unknown) {
            return false;
        }
    }

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

    private View checkDenseOwner(String name) {
        View v = view;
        int owner = v.table() == null ? -1 : v.table().slots().serverOf(PsDescriptor.denseKey(name));
        if (owner != v.self() || owner < 0) {
            throw PsDescriptor.wrongServer(v.generation(), "dense tensor '" + name + "' belongs to server "
                    + owner + ", not " + v.self());
        }
        return v;
    }

    /**
     * {@link #checkOwned} for a dense tensor: this server owns its group ({@link DenseMove}) and
     * knows the client's table; returns the view checked against.
     */
    private View checkDenseOwned(String name, long clientGeneration) {
        View v = view;
        if (v.table() == null || clientGeneration > v.generation()) {
            throw PsDescriptor.wrongServer(v.generation(), "the client routes by generation " + clientGeneration
                    + "; this server knows " + v.generation() + " and catches up");
        }
        gate.checkReads(v.generation());
        int owner = v.table().slots().serverOf(PsDescriptor.denseKey(name));
        if (owner != v.self()) {
            throw PsDescriptor.wrongServer(v.generation(), "dense tensor '" + name + "' belongs to server " + owner
                    + ", not " + v.self() + " in generation " + v.generation() + "; the client routed by generation "
                    + clientGeneration);
        }
        return v;
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

    /**
     * Checks that this server owns every id in its current table and knows the client's table;
     * returns the view checked against, whose generation the answer carries.
     */
    private View checkOwned(long[] ids, int count, long clientGeneration) {
        View v = view;
        if (v.table() == null || clientGeneration > v.generation()) {
            throw PsDescriptor.wrongServer(v.generation(), "the client routes by generation " + clientGeneration
                    + "; this server knows " + v.generation() + " and catches up");
        }
        gate.checkReads(v.generation());
        SlotTable slots = v.table().slots();
        for (int i = 0; i < count; i++) {
            int owner = slots.serverOfSlot(Slots.slotOf(ids[i]));
            if (owner != v.self()) {
                throw PsDescriptor.wrongServer(v.generation(), "id " + ids[i] + " (slot " + Slots.slotOf(ids[i])
                        + ") belongs to server " + owner + ", not " + v.self() + " in generation " + v.generation()
                        + "; the client routed by generation " + clientGeneration);
            }
        }
        return v;
    }
}
