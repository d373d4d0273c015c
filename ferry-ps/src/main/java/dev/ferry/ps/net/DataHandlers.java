package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;
import dev.ferry.rpc.ServerCall;

/**
 * The data path of a {@link PsServer}: the handlers of {@code PULL}, {@code PUSH},
 * {@code DENSE_PULL} and {@code DENSE_PUSH}, and the checks every such request passes whole
 * before it touches a table (header, table, dimension, size limits, exact length, and that this
 * server owns every id in its {@link PsServer.View} and knows the client's generation).
 *
 * <p>A pull gathers rows straight into the registered reply buffer; a push hands the optimizer a
 * view of the registered request buffer, through the move in progress ({@link MoveSource}) and
 * the backups ({@link Replicator}). Only the ids are copied, into a per-thread array, because
 * the storage layer takes them as a {@code long[]}. Stateless apart from that array: the view,
 * the gate and the moves belong to the server.
 */
final class DataHandlers {

    private static final ThreadLocal<long[][]> IDS = ThreadLocal.withInitial(() -> new long[][] {new long[1024]});

    private final ParameterServer ps;
    private final PsServer server;
    private final MoveSource moveSource;
    private final Replicator replicator;

    DataHandlers(ParameterServer ps, PsServer server, MoveSource moveSource, Replicator replicator) {
        this.ps = ps;
        this.server = server;
        this.moveSource = moveSource;
        this.replicator = replicator;
    }

    void pull(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        String name = PsDescriptor.name(body);
        int dimension = PsDescriptor.dimension(body);
        int count = PsDescriptor.count(body);
        checkSparse(name, dimension);
        long rowBytes = checkCount(count, PsDescriptor.rowsBytes(count, Math.max(dimension, 0)));
        checkLength(body, PsDescriptor.pullBytes(PsDescriptor.nameLength(body), count), "PULL", count, dimension);
        long[] ids = readIds(body, count);
        PsServer.View v = checkOwned(ids, count, PsDescriptor.generation(body));
        PullFormat format = PullFormat.ofCode(PsDescriptor.offset(body));
        long replyBytes = format.rowsBytes(count, dimension);
        MemorySegment out = call.reply((int) replyBytes + PsDescriptor.GENERATION_TRAILER);
        PullEncoder.pull(ps, name, dimension, ids, count, format, out);
        out.set(PsDescriptor.LONG, replyBytes, v.generation());
    }

    void push(ServerCall call) {
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
        PsServer.View v;
        try {
            v = checkOwned(ids, count, PsDescriptor.generation(body));
            server.gate().checkPushes(v.generation());
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

    void densePull(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        DenseTensor tensor = checkDenseRouted(body);
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

    void densePush(ServerCall call) {
        MemorySegment body = call.request();
        PsDescriptor.checkHeader(body);
        DenseTensor tensor = checkDenseRouted(body);
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
            PsServer.View v = checkDenseOwned(tensor.name(), PsDescriptor.generation(body));
            server.gate().checkPushes(v.generation());
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

    // ------------------------------------------------------------------------------------------
    // Checks

    private void checkSparse(String name, int dimension) {
        SparseTable table = ps.table(name);
        if (dimension != table.dimension()) {
            throw new PsException(PsException.Code.WRONG_DIMENSION, "table '" + name + "' has dimension "
                    + table.dimension() + "; the request says " + dimension);
        }
    }

    /**
     * {@link #checkDense}, where a tensor this server does not hold is first checked against the
     * routing: a client that routed by another generation than this server's (a member lost or
     * joined meanwhile) is told to route again ({@link #checkDenseOwned}'s refusal), not that the
     * tensor does not exist, which it would take as final. The ownership is checked again, under
     * the push's barrier, once the tensor is found.
     */
    private DenseTensor checkDenseRouted(MemorySegment body) {
        try {
            return checkDense(body);
        } catch (PsException unknown) {
            if (unknown.code() == PsException.Code.UNKNOWN_TABLE && server.view().table() != null) {
                checkDenseOwned(PsDescriptor.name(body), PsDescriptor.generation(body));
            }
            throw unknown;
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

    /**
     * {@link #checkOwned} for a dense tensor: this server owns its group ({@link DenseMove}) and
     * knows the client's table; returns the view checked against.
     */
    private PsServer.View checkDenseOwned(String name, long clientGeneration) {
        PsServer.View v = server.view();
        if (v.table() == null || clientGeneration > v.generation()) {
            throw PsDescriptor.wrongServer(v.generation(), "the client routes by generation " + clientGeneration
                    + "; this server knows " + v.generation() + " and catches up");
        }
        server.gate().checkReads(v.generation());
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
    private PsServer.View checkOwned(long[] ids, int count, long clientGeneration) {
        PsServer.View v = server.view();
        if (v.table() == null || clientGeneration > v.generation()) {
            throw PsDescriptor.wrongServer(v.generation(), "the client routes by generation " + clientGeneration
                    + "; this server knows " + v.generation() + " and catches up");
        }
        server.gate().checkReads(v.generation());
        SlotTable slots = v.table().slots();
        int foreign = slots.owned(v.self()).firstForeign(ids, count);
        if (foreign >= 0) {
            long id = ids[foreign];
            throw PsDescriptor.wrongServer(v.generation(), "id " + id + " (slot " + Slots.slotOf(id)
                    + ") belongs to server " + slots.serverOf(id) + ", not " + v.self() + " in generation "
                    + v.generation() + "; the client routed by generation " + clientGeneration);
        }
        return v;
    }
}
