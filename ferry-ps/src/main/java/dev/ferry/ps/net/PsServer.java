package dev.ferry.ps.net;

import java.nio.file.Path;
import java.util.Objects;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
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
 * <p>This class wires the roles and holds the state they share (the routing {@link View}, the
 * {@link ServingGate}): {@code DataHandlers} (pull and push, sparse and dense),
 * {@code AdminHandlers} (tables, describe, routing, checkpoints), {@code MoveSource} and
 * {@code MoveTarget} (slot moves), {@code Replicator} and {@code ReplicaApplier} (backups).
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

    private final ParameterServer ps;
    private final String memberId;
    private final Path checkpointDirectory;
    private final RpcServer rpc;
    private final MoveSource moveSource;
    private final MoveTarget moveTarget;
    private final Replicator replicator;
    private final ReplicaApplier replicaApplier;
    private final DataHandlers data;
    private final AdminHandlers admin;
    private final ServingGate gate = new ServingGate();
    private volatile TransportConfig transport;
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
        this.data = new DataHandlers(ps, this, moveSource, replicator);
        this.admin = new AdminHandlers(ps, this, moveSource, replicator, checkpointDirectory);
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
        this.data = new DataHandlers(ps, this, moveSource, replicator);
        this.admin = new AdminHandlers(ps, this, moveSource, replicator, checkpointDirectory);
        this.rpc = register(RpcServer.open(config), inlinePulls);
    }

    private RpcServer register(RpcServer server, boolean inlinePulls) {
        return server
                .register(inlinePulls ? PsDescriptor.PULL.inline() : PsDescriptor.PULL, guarded(data::pull))
                .register(PsDescriptor.PUSH, guarded(data::push))
                .register(PsDescriptor.DENSE_PULL, guarded(data::densePull))
                .register(PsDescriptor.DENSE_PUSH, guarded(data::densePush))
                .register(PsDescriptor.CREATE_TABLE, guarded(admin::create))
                .register(PsDescriptor.DESCRIBE, guarded(admin::describe))
                .register(PsDescriptor.SLOT_TABLE, guarded(admin::slotTable))
                .register(PsDescriptor.CHECKPOINT, guarded(admin::checkpoint))
                .register(PsDescriptor.ROUTING, guarded(admin::routing))
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
        admin.onTableCreated(listener);
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

    /** Whether {@code group} is in the move this server is sending. */
    boolean movingOut(int group) {
        return moveSource.movingGroup(group);
    }

    /** A deduped retry's ids: a move's target must still see it ({@link MoveSource#resendMoving}). */
    void resendMoving(String name, long[] ids, int count, long millis, long dedupe) {
        moveSource.resendMoving(name, ids, count, millis, dedupe);
    }

    /** Where {@code CHECKPOINT} writes this server's checkpoints, or null if it refuses them. */
    public Path checkpointDirectory() {
        return checkpointDirectory;
    }
}
