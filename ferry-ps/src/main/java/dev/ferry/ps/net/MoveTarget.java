package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.ServerCall;

/**
 * The receiving end of a slot move on the new owner: {@code MOVE_BEGIN} readies the groups
 * (tables created, stale rows of those groups reset), then {@code MOVE_ROWS} merges the old
 * owner's snapshot and the rows it forwards after each push, by step count, in any order.
 *
 * <p>The fence: once this server enforces a table in which it owns a group, it refuses rows for
 * that group, so that a push the old owner applies after the flip is refused there too (its
 * client retries here). The check and the merge run under {@link #fence}'s read lock, and
 * {@link PsServer#install} swaps the table under its write lock: a merge either finishes before
 * the new table is enforced, or sees it and refuses.
 */
final class MoveTarget {

    private final ParameterServer ps;
    private final PsServer server;
    private final DedupeWindow window;
    /** Read: a merge of moved rows. Write: a new routing table being installed. */
    final ReentrantReadWriteLock fence = new ReentrantReadWriteLock();
    private volatile Incoming incoming;

    /** The move being received: its id and its groups. */
    private record Incoming(long id, boolean[] groups) {
    }

    MoveTarget(ParameterServer ps, PsServer server, DedupeWindow window) {
        this.ps = ps;
        this.server = server;
        this.window = window;
    }

    /** Handles {@code MOVE_BEGIN}. */
    void begin(ServerCall call) {
        RoutingTable current = server.routingTable();
        int self = server.index();
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        long moveId = PsDescriptor.dedupeId(body);
        int count = PsDescriptor.count(body);
        if (count < 1 || count > RoutingTable.GROUPS) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a move of " + count + " groups");
        }
        long at = PsDescriptor.payloadOffset(0);
        need(body, at, 4L * count, count + " groups");
        boolean[] groups = new boolean[RoutingTable.GROUPS];
        for (int i = 0; i < count; i++) {
            int g = body.get(PsDescriptor.INT, at + 4L * i);
            if (g < 0 || g >= RoutingTable.GROUPS) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "group " + g + " is outside [0, "
                        + RoutingTable.GROUPS + ")");
            }
            if (current != null && self >= 0 && current.ownerOfGroup(g) == self) {
                throw PsDescriptor.wrongServer(current.generation(), "group " + g + " is already this server's");
            }
            groups[g] = true;
        }
        at += (4L * count + 7) & ~7L;
        need(body, at, 8, "its table count");
        int tables = body.get(PsDescriptor.INT, at);
        at += 8;
        for (int t = 0; t < tables; t++) {
            need(body, at, 8, "the length of table " + t);
            int length = body.get(PsDescriptor.INT, at);
            need(body, at + 8, length, "table " + t + " of " + length + " bytes");
            MemorySegment create = body.asSlice(at + 8, length);
            PsDescriptor.checkHeader(create);
            TableConfig config = PsDescriptor.readTable(create);
            try {
                ps.table(config.name());
            } catch (PsException unknown) {
                if (unknown.code() != PsException.Code.UNKNOWN_TABLE) {
                    throw unknown;
                }
                try {
                    ps.createTable(config);
                } catch (PsException exists) {
                    if (exists.code() != PsException.Code.TABLE_EXISTS) {
                        throw exists;
                    }
                }
            }
            at += 8 + ((length + 7) & ~7L);
        }
        fence.writeLock().lock();
        try {
            for (var stats : ps.stats()) {
                SparseTable table = sparse(stats.name());
                if (table != null) {
                    RowTransfer.reset(table, id -> groups[RoutingTable.groupOf(id)]);
                }
            }
            for (int g = 0; g < RoutingTable.GROUPS; g++) {
                if (groups[g]) {
                    window.clear(g);
                }
            }
            DenseMove.dropStale(ps, groups);
            incoming = new Incoming(moveId, groups);
        } finally {
            fence.writeLock().unlock();
        }
    }

    /** Checks that {@code body} holds {@code bytes} more at {@code at}, before they are read. */
    private static void need(MemorySegment body, long at, long bytes, String what) {
        if (bytes < 0 || at + bytes > body.byteSize()) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a MOVE_BEGIN of " + body.byteSize()
                    + " bytes is too short for " + what);
        }
    }

    /** Handles {@code MOVE_ROWS}. */
    void rows(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        long moveId = PsDescriptor.dedupeId(body);
        SparseTable table = ps.table(PsDescriptor.name(body));
        long rowBytes = RowTransfer.rowBytes(table);
        int count = PsDescriptor.count(body);
        long at = PsDescriptor.payloadOffset(PsDescriptor.nameLength(body));
        if (count < 0 || body.byteSize() != at + count * rowBytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "MOVE_ROWS of " + count + " rows of " + rowBytes
                    + " bytes in a body of " + body.byteSize());
        }
        MemorySegment rows = body.asSlice(at, count * rowBytes);
        fence.readLock().lock();
        try {
            // Read under the fence: PsServer.install swaps the table under its write lock.
            RoutingTable current = server.routingTable();
            int self = server.index();
            // The fence first: once the groups are this server's, their old owner must retry here.
            for (long r = 0; r < rows.byteSize(); r += rowBytes) {
                int g = RoutingTable.groupOf(RowTransfer.idOf(rows, r));
                if (current != null && self >= 0 && current.ownerOfGroup(g) == self) {
                    throw PsDescriptor.wrongServer(current.generation(), "group " + g
                            + " already belongs to this server: rows from its old owner are refused");
                }
            }
            Incoming in = incoming;
            if (in == null || in.id() != moveId) {
                // Not WRONG_SERVER: the sender keeps the push (it is still the owner) and waits.
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "move " + moveId
                        + " is not being received here");
            }
            for (long r = 0; r < rows.byteSize(); r += rowBytes) {
                int g = RoutingTable.groupOf(RowTransfer.idOf(rows, r));
                if (!in.groups()[g]) {
                    throw new PsException(PsException.Code.INVALID_ARGUMENT, "a row of group " + g
                            + ", which move " + moveId + " does not carry");
                }
            }
            RowTransfer.merge(table, rows);
            long dedupe = PsDescriptor.generation(body); // a forward's push; 0 for the snapshot
            for (long r = 0; dedupe != 0 && r < rows.byteSize(); r += rowBytes) {
                window.record(RoutingTable.groupOf(RowTransfer.idOf(rows, r)), dedupe);
            }
        } finally {
            fence.readLock().unlock();
        }
    }

    /**
     * Handles {@code MOVE_DENSE} ({@link DenseMove}): a dense tensor's whole row from the old
     * owner of its group, merged by step count (the snapshot's copy replaces a stale one), behind
     * the same fence as {@code MOVE_ROWS}. Creates the tensor if this server has none.
     */
    void dense(ServerCall call) {
        MemorySegment body = call.request();
        DenseMove.Received received = DenseMove.read(body);
        long moveId = PsDescriptor.dedupeId(body);
        long dedupe = PsDescriptor.generation(body); // a forward's push; 0 for the snapshot
        int g = DenseMove.groupOf(received.config().name());
        fence.readLock().lock();
        try {
            RoutingTable current = server.routingTable();
            int self = server.index();
            if (current != null && self >= 0 && current.ownerOfGroup(g) == self) {
                throw PsDescriptor.wrongServer(current.generation(), "group " + g + " (dense tensor '"
                        + received.config().name() + "') already belongs to this server: its old owner's copy is refused");
            }
            Incoming in = incoming;
            if (in == null || in.id() != moveId) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "move " + moveId
                        + " is not being received here");
            }
            if (!in.groups()[g]) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "dense tensor '" + received.config().name()
                        + "' is in group " + g + ", which move " + moveId + " does not carry");
            }
            dev.ferry.ps.DenseTransfer.merge(DenseMove.tensor(ps, received.config()), received.row(),
                    received.snapshot());
            if (dedupe != 0) {
                window.record(g, dedupe);
            }
        } finally {
            fence.readLock().unlock();
        }
    }

    /** Handles {@code MOVE_DEDUPE}: records the source's dedupe ids of the moving groups. */
    void dedupe(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        long moveId = PsDescriptor.dedupeId(body);
        int count = PsDescriptor.count(body);
        long at = PsDescriptor.payloadOffset(PsDescriptor.nameLength(body));
        if (count < 0 || body.byteSize() != at + (long) count * ReplicationDescriptor.GROUP_ENTRY) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "MOVE_DEDUPE of " + count + " entries in a body of "
                    + body.byteSize());
        }
        Incoming in = incoming;
        if (in == null || in.id() != moveId) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "move " + moveId + " is not being received here");
        }
        for (int i = 0; i < count; i++) {
            int g = ReplicationDescriptor.group(body, at, i);
            if (g < 0 || g >= RoutingTable.GROUPS || !in.groups()[g]) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "a dedupe id of group " + g
                        + ", which move " + moveId + " does not carry");
            }
        }
        // Older than every forward recorded meanwhile: they go in behind them (DedupeWindow.recordOlder).
        long[] ids = new long[count];
        for (int i = 0; i < count; ) {
            int g = ReplicationDescriptor.group(body, at, i);
            int n = 0;
            for (; i < count && ReplicationDescriptor.group(body, at, i) == g; i++) {
                ids[n++] = ReplicationDescriptor.epoch(body, at, i);
            }
            window.recordOlder(g, ids, n);
        }
    }

    /** The move ends here (flipped or cancelled). */
    void end(long moveId) {
        Incoming in = incoming;
        if (in != null && in.id() == moveId) {
            incoming = null;
        }
    }

    private SparseTable sparse(String name) {
        try {
            return ps.table(name);
        } catch (PsException dense) {
            return null;
        }
    }
}
