package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.rpc.ServerCall;

/**
 * The backup's end of push replication ({@code REPLICATE}, {@link ReplicationDescriptor}): checks
 * that the sender is the primary of every group at the epoch this server knows and that this
 * server is in the group's in-sync set, merges the rows by step count, and records the push's
 * dedupe id for those groups, so that a client's retry after a failover is applied at most once.
 *
 * <p>Runs inline on the transport thread: a few row copies under shard locks, no I/O, so a
 * backup answers even when every handler thread waits on replication elsewhere (two servers that
 * back each other up would otherwise starve each other). The check and the merge hold
 * {@link MoveTarget#fence}'s read lock, under whose write lock {@link PsServer#install} swaps
 * the tables: rows of an epoch this server just left are either merged before it acts as the
 * new primary, or refused.
 */
final class ReplicaApplier {

    private final ParameterServer ps;
    private final PsServer server;
    private final MoveTarget fence;
    private final DedupeWindow window;

    ReplicaApplier(ParameterServer ps, PsServer server, MoveTarget fence, DedupeWindow window) {
        this.ps = ps;
        this.server = server;
        this.fence = fence;
        this.window = window;
    }

    /** Handles {@code REPLICATE}. */
    void receive(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        int rows = PsDescriptor.count(body);
        int groups = PsDescriptor.offset(body);
        if (rows < 0 || groups < 0 || groups > RoutingTable.GROUPS) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "REPLICATE of " + rows + " rows in " + groups
                    + " groups");
        }
        MemorySegment out = call.reply(ReplicationDescriptor.ANSWER);
        SparseTable table;
        try {
            table = ps.table(PsDescriptor.name(body));
        } catch (PsException unknown) {
            if (unknown.code() != PsException.Code.UNKNOWN_TABLE) {
                throw unknown;
            }
            // Tables reach every member through the cluster; this one has not yet.
            ReplicationDescriptor.writeAnswer(out, ReplicationDescriptor.BEHIND, server.view().generation());
            return;
        }
        long rowBytes = RowTransfer.rowBytes(table);
        long groupsAt = ReplicationDescriptor.groupsAt(body);
        long rowsAt = groupsAt + (long) groups * ReplicationDescriptor.GROUP_ENTRY;
        if (body.byteSize() != rowsAt + rows * rowBytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "REPLICATE of " + rows + " rows of " + rowBytes
                    + " bytes and " + groups + " groups in a body of " + body.byteSize());
        }
        boolean[] listed = LISTED.get();
        java.util.Arrays.fill(listed, false);
        long sender = PsDescriptor.generation(body);
        fence.fence.readLock().lock();
        try {
            PsServer.View v = server.view();
            int status = check(body, groupsAt, groups, sender, v, listed);
            if (status == ReplicationDescriptor.APPLIED) {
                MemorySegment data = body.asSlice(rowsAt, rows * rowBytes);
                for (long r = 0; r < data.byteSize(); r += rowBytes) {
                    int g = RoutingTable.groupOf(RowTransfer.idOf(data, r));
                    if (!listed[g]) {
                        throw new PsException(PsException.Code.INVALID_ARGUMENT, "a replicated row of group " + g
                                + ", which the request does not list");
                    }
                }
                RowTransfer.merge(table, data);
                long dedupe = PsDescriptor.dedupeId(body);
                for (int i = 0; i < groups; i++) {
                    window.record(ReplicationDescriptor.group(body, groupsAt, i), dedupe);
                }
            }
            ReplicationDescriptor.writeAnswer(out, status, v.generation());
        } finally {
            fence.fence.readLock().unlock();
        }
    }

    /**
     * Handles {@code REPLICATE_DENSE} ({@link DenseReplication}): the same checks as
     * {@code REPLICATE} for the tensor's one group, then the tensor (created here if this server
     * has none) keeps the copy with the most steps, and the push's id is recorded for the group,
     * all under the install fence's read lock.
     */
    void receiveDense(ServerCall call) {
        MemorySegment body = call.request();
        DenseReplication.Received received = DenseReplication.read(body);
        MemorySegment out = call.reply(ReplicationDescriptor.ANSWER);
        long groupsAt = ReplicationDescriptor.groupsAt(body);
        int g = ReplicationDescriptor.group(body, groupsAt, 0);
        boolean[] listed = LISTED.get();
        listed[g] = false;
        fence.fence.readLock().lock();
        try {
            PsServer.View v = server.view();
            int status = check(body, groupsAt, 1, PsDescriptor.generation(body), v, listed);
            listed[g] = false;
            if (status == ReplicationDescriptor.APPLIED) {
                DenseTransfer.merge(DenseMove.tensor(ps, received.config()), received.row(), false);
                window.record(g, PsDescriptor.dedupeId(body));
            }
            ReplicationDescriptor.writeAnswer(out, status, v.generation());
        } finally {
            fence.fence.readLock().unlock();
        }
    }

    private static final ThreadLocal<boolean[]> LISTED = ThreadLocal.withInitial(() -> new boolean[RoutingTable.GROUPS]);

    private static int check(MemorySegment body, long groupsAt, int groups, long sender, PsServer.View v,
            boolean[] listed) {
        Replicas replicas = v.replicas();
        if (v.table() == null || replicas == null) {
            return ReplicationDescriptor.BEHIND;
        }
        boolean newer = sender > v.generation();
        boolean behind = false;
        for (int i = 0; i < groups; i++) {
            int g = ReplicationDescriptor.group(body, groupsAt, i);
            long epoch = ReplicationDescriptor.epoch(body, groupsAt, i);
            listed[g] = true;
            if (epoch < replicas.epoch(g)) {
                return ReplicationDescriptor.FENCED;
            }
            if (epoch > replicas.epoch(g)) {
                behind = true;
            } else if (!replicas.isBackup(g, v.self())) {
                if (!newer) {
                    return ReplicationDescriptor.NOT_IN_SYNC;
                }
                behind = true;
            }
        }
        return behind ? ReplicationDescriptor.BEHIND : ReplicationDescriptor.APPLIED;
    }
}
