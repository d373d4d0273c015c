package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.transport.TransportConfig;

/**
 * The sending end of a slot move on the old owner, which keeps serving the groups meanwhile:
 * {@link #run} readies the new owner ({@code MOVE_BEGIN}), then streams a snapshot of the groups'
 * rows ({@code MOVE_ROWS}); from the moment it starts until {@link #end}, every push that touches
 * a moving group forwards the updated whole rows to the new owner before it is acknowledged
 * ({@link #forward}).
 *
 * <p>Why nothing acknowledged is lost or applied twice: pushes hold {@link #barrier}'s read lock
 * from the ownership check to the forward, and the move starts under its write lock, so a push
 * either finished before the snapshot (which then holds it) or forwards its rows. The new owner
 * keeps, per id, the row with more steps. After the flip the new owner refuses forwarded rows
 * ({@link MoveTarget}); such a push is answered {@code WRONG_SERVER} and retried by its client at
 * the new owner, where it was never applied. If the new owner cannot be reached, the push waits
 * until the move is cancelled ({@link #end}) and is then acknowledged here, its owner still.
 *
 * <p>Whole rows are cumulative: a row copied after push A was applied carries A, whichever push
 * copies it. So the apply of a push's moving ids and its forward run under the move's
 * {@code forwarding} lock, one push at a time, and so does the snapshot's copy and send of each
 * shard: every row the new owner merged was copied before any push whose forward it refused was
 * applied, and a push answered {@code WRONG_SERVER} is in none of them. Without it, push B could
 * copy and forward a row holding push A while A's own forward, later, met the fence: A retried
 * at the new owner counted twice. A forward whose outcome is unknown (no answer in time) and that
 * then meets the fence is failed with {@code CLOSED} (the push may be in the new owner's rows),
 * never answered {@code WRONG_SERVER}, so it is not applied twice.
 */
final class MoveSource implements AutoCloseable {

    /** Bytes of rows per {@code MOVE_ROWS} message of the snapshot. */
    private static final long RUN_BYTES = 1 << 20;
    /** Deadline of one server-to-server call; a forward is retried after it. */
    private static final long CALL_MILLIS = 5_000;

    private final ParameterServer ps;
    private final PsServer server;
    private final RpcConfig config;
    private final DedupeWindow window;
    /** Read: a push from its ownership check to its forward. Write: a move starting. */
    final ReentrantReadWriteLock barrier = new ReentrantReadWriteLock();
    private volatile Outgoing outgoing;
    private RpcClient peers;

    /** The move being sent; {@code ended} is set (without the barrier) when it is over. */
    private static final class Outgoing {
        final long id;
        final boolean[] groups;
        final int firstGroup;
        final RpcChannel target;
        /** Held from the apply of a push's moving ids to the end of its forward, and per snapshot shard. */
        final ReentrantLock forwarding = new ReentrantLock();
        /** Pushes whose forward ran out of time: sent again with their ids before any later forward. */
        final UnsentForwards unsent = new UnsentForwards(forwarding);
        volatile boolean ended;

        Outgoing(long id, boolean[] groups, int firstGroup, RpcChannel target) {
            this.id = id;
            this.groups = groups;
            this.firstGroup = firstGroup;
            this.target = target;
        }

        long id() {
            return id;
        }

        boolean[] groups() {
            return groups;
        }

        RpcChannel target() {
            return target;
        }
    }

    MoveSource(ParameterServer ps, PsServer server, RpcConfig config, DedupeWindow window) {
        this.ps = ps;
        this.server = server;
        this.config = config;
        this.window = window;
    }

    /**
     * Moves {@code groups} to the server at {@code targetAddress}: readies it, starts forwarding,
     * streams the snapshot. Returns when every row is there; pushes keep being forwarded until
     * {@link #end}.
     *
     * @throws PsException or an RPC exception if the target refuses or cannot be reached; the
     *                     move is then ended here
     */
    void run(long moveId, int[] groups, String targetAddress, TransportConfig transport) {
        RpcChannel target = channel(targetAddress, transport);
        boolean[] moving = new boolean[RoutingTable.GROUPS];
        for (int g : groups) {
            moving[g] = true;
        }
        List<SparseTable> tables = new ArrayList<>();
        for (TableStats stats : ps.stats()) {
            try {
                tables.add(ps.table(stats.name()));
            } catch (PsException dense) {
                // Dense tensors move by their whole row: sendDense.
            }
        }
        try {
            send(target, PsDescriptor.MOVE_BEGIN, beginBody(moveId, groups, tables));
            Outgoing o = new Outgoing(moveId, moving, groups[0], target);
            byte[] dedupe;
            barrier.writeLock().lock();
            try {
                outgoing = o;
                // The dedupe ids of every push applied so far: later ones travel with their forwards.
                dedupe = dedupeBody(moveId, groups);
            } finally {
                barrier.writeLock().unlock();
            }
            send(target, ReplicationDescriptor.MOVE_DEDUPE, dedupe);
            for (SparseTable table : tables) {
                byte[] name = PsDescriptor.nameBytes(table.name());
                long rowBytes = RowTransfer.rowBytes(table);
                RowTransfer.export(table, id -> moving[RoutingTable.groupOf(id)], RUN_BYTES, o.forwarding, rows -> {
                    int count = (int) (rows.byteSize() / rowBytes);
                    send(target, PsDescriptor.MOVE_ROWS, rowsBody(moveId, name, table.dimension(), count, rows));
                });
            }
            sendDense(o, moving);
            // Before the move reports ready: a snapshot shard copied after a push whose forward ran
            // out of time carries its effect; its id must be there too before the flip.
            o.forwarding.lock();
            try {
                if (!o.unsent.flush(moveId, f -> send(target, f.method(), f.body()))) {
                    throw new IllegalStateException("the pushes whose forward ran out of time could not be sent to "
                            + targetAddress + " again; the move does not report ready");
                }
            } finally {
                o.forwarding.unlock();
            }
        } catch (RuntimeException e) {
            end(moveId);
            throw e;
        }
    }

    /**
     * The snapshot's part of the dense tensors in the moving groups ({@link DenseMove}): each
     * one's whole row, copied and sent under the forwarding lock, as a shard of sparse rows.
     */
    private void sendDense(Outgoing o, boolean[] moving) {
        for (TableStats stats : ps.stats()) {
            DenseTensor tensor = denseOrNull(stats.name());
            if (tensor == null || !moving[DenseMove.groupOf(tensor.name())]) {
                continue;
            }
            o.forwarding.lock();
            try {
                send(o.target(), DenseMove.MOVE_DENSE, DenseMove.body(o.id(), tensor, 0, true));
            } finally {
                o.forwarding.unlock();
            }
        }
    }

    private DenseTensor denseOrNull(String name) {
        try {
            return ps.dense(name);
        } catch (PsException sparse) {
            return null;
        }
    }

    /**
     * Applies a dense push here (the caller holds {@link #barrier}'s read lock and checked the
     * ownership) and, while the tensor's group moves, forwards its whole row to the new owner
     * before returning, exactly as {@link #pushMoving} does for sparse rows.
     *
     * @throws PsException {@code WRONG_SERVER} if the new owner owns the tensor already (the push
     *                     must be retried there, where it was never applied); {@code CLOSED} as a
     *                     sparse forward
     */
    void pushDense(DenseTensor tensor, MemorySegment gradients, long remainingMillis, long dedupe) {
        Outgoing o = outgoing;
        if (o == null || !o.groups()[DenseMove.groupOf(tensor.name())]) {
            DenseMove.apply(tensor, gradients, dedupe, window);
            return;
        }
        long waitStart = System.nanoTime();
        lockForwarding(o, remainingMillis);
        long left = remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart);
        try {
            DenseMove.apply(tensor, gradients, dedupe, window);
            sendForward(o, DenseMove.MOVE_DENSE, "tensor", DenseMove.body(o.id(), tensor, dedupe, false), left,
                    () -> o.unsent.dense(tensor, dedupe));
        } finally {
            o.forwarding.unlock();
        }
    }

    /**
     * After a dense tensor was created here (the caller holds {@link #barrier}'s read lock): if
     * its group is moving, sends it to the new owner, which would otherwise miss it.
     */
    void createdDense(DenseTensor tensor, long remainingMillis) {
        Outgoing o = outgoing;
        if (o == null || !o.groups()[DenseMove.groupOf(tensor.name())]) {
            return;
        }
        long waitStart = System.nanoTime();
        lockForwarding(o, remainingMillis);
        try {
            sendForward(o, DenseMove.MOVE_DENSE, "tensor", DenseMove.body(o.id(), tensor, 0, false),
                    remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart),
                    () -> o.unsent.dense(tensor, 0));
        } finally {
            o.forwarding.unlock();
        }
    }


    /**
     * Stops forwarding for {@code moveId} (flipped or cancelled); another id is ignored. Does not
     * wait for the pushes in flight: the caller (a cluster member's event thread) must go on
     * installing tables, which such a push may be waiting for.
     */
    void end(long moveId) {
        Outgoing o = outgoing;
        if (o == null || o.id() != moveId) {
            return;
        }
        // First the flag, which pushes waiting in forward() watch; then the barrier, so that no push
        // that saw the move is still between its ownership check and its forward when it is gone.
        o.ended = true;
        if (barrier.writeLock().tryLock()) {
            clear(o);
            return;
        }
        // A push holds the barrier, and may hold it until the caller installs a newer table (one
        // whose backup did not answer waits for the table without it): waiting for the barrier
        // here stalled that install, and the push, until the push's deadline. The flag is set, so
        // a push that still sees the move meanwhile forwards as before, or returns once the
        // target refuses (a copy whose target ended it; a flipped move's pushes fail the check).
        Thread.ofVirtual().name("ferry-move-end-" + moveId).start(() -> {
            barrier.writeLock().lock();
            clear(o);
        });
    }

    /** Under {@link #barrier}'s write lock, which it releases: forgets {@code o} if it is still the move. */
    private void clear(Outgoing o) {
        try {
            if (outgoing == o) {
                outgoing = null;
            }
        } finally {
            barrier.writeLock().unlock();
        }
    }

    /** Whether {@code group} is in the move being sent. */
    boolean movingGroup(int group) {
        Outgoing o = outgoing;
        return o != null && o.groups()[group];
    }

    /** The move being sent, or -1. */
    long moving() {
        Outgoing o = outgoing;
        return o == null ? -1 : o.id();
    }

    /**
     * Applies a push that touches a moving group, in two steps, or returns false (and does nothing)
     * if it touches none: first the ids of moving groups, whose updated rows are then forwarded
     * ({@link #forward}); only then the other ids. So a push refused because the groups flipped
     * meanwhile changed nothing that this server still owns, and its client may retry all of it.
     */
    boolean pushMoving(String name, int dimension, long[] ids, int count, MemorySegment gradients,
            long remainingMillis, long dedupe) {
        Outgoing o = outgoing;
        if (o == null) {
            return false;
        }
        int moving = 0;
        for (int i = 0; i < count; i++) {
            if (o.groups()[RoutingTable.groupOf(ids[i])]) {
                moving++;
            }
        }
        if (moving == 0) {
            return false;
        }
        long rowBytes = (long) dimension * Float.BYTES;
        long[] order = new long[count];
        MemorySegment grads = MemorySegment.ofArray(new float[Math.multiplyExact(count, dimension)]);
        int first = 0;
        int rest = moving;
        for (int i = 0; i < count; i++) {
            int to = o.groups()[RoutingTable.groupOf(ids[i])] ? first++ : rest++;
            order[to] = ids[i];
            MemorySegment.copy(gradients, i * rowBytes, grads, to * rowBytes, rowBytes);
        }
        SparseTable table = ps.table(name);
        long waitStart = System.nanoTime();
        lockForwarding(o, remainingMillis);
        long left = remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart);
        try {
            ps.push(name, dimension, order, 0, moving, grads.asSlice(0, moving * rowBytes));
            // Applied here whatever the forward's outcome: a retry here (its client timed out
            // while the forward waited) must find the id, not apply the push again.
            for (int i = 0; i < moving; i++) {
                window.record(RoutingTable.groupOf(order[i]), dedupe);
            }
            Runnable hook = afterMovingApplied;
            if (hook != null) {
                hook.run();
            }
            forward(o, table, order, moving, left, dedupe);
        } finally {
            o.forwarding.unlock();
        }
        if (count > moving) {
            ps.push(name, dimension, order, moving, count - moving, grads.asSlice(moving * rowBytes));
        }
        return true;
    }

    /**
     * For a client's retry whose ids were applied here already (deduped: nothing to apply): if
     * some are in groups being moved, forwards their current rows with the push's dedupe id, so
     * that the new owner fences the retry once it owns them. Without it, such a retry went on to
     * replicate this server's rows to the groups' backup at the old epoch after the flip, rows
     * that can hold a push the new owner fenced out (applied here, not recorded, retried there):
     * the backup then held that push's effect without its id, and a retry of it after the
     * backup's promotion was applied twice.
     *
     * @throws PsException {@code WRONG_SERVER} if the new owner owns the groups already (nothing
     *                     changed here; the client retries there, where the move carried the id)
     */
    void resendMoving(String name, long[] ids, int count, long remainingMillis, long dedupe) {
        Outgoing o = outgoing;
        if (o == null) {
            return;
        }
        int moving = 0;
        for (int i = 0; i < count; i++) {
            moving += o.groups()[RoutingTable.groupOf(ids[i])] ? 1 : 0;
        }
        if (moving == 0) {
            return;
        }
        long[] moved = new long[moving];
        moving = 0;
        for (int i = 0; i < count; i++) {
            if (o.groups()[RoutingTable.groupOf(ids[i])]) {
                moved[moving++] = ids[i];
            }
        }
        long waitStart = System.nanoTime();
        lockForwarding(o, remainingMillis);
        try {
            forward(o, ps.table(name), moved, moving,
                    remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart), dedupe);
        } finally {
            o.forwarding.unlock();
        }
    }

    /** Tests only: runs after a push's moving ids were applied, before their forward, under the lock. */
    static volatile Runnable afterMovingApplied;
    /** Tests only: true for a forward's body makes its attempt fail as if the target did not answer (null outside tests). */
    static volatile java.util.function.Predicate<byte[]> forwardFault;

    /** Takes {@code o.forwarding} within the call's time, else fails the push, which changed nothing yet. */
    private static void lockForwarding(Outgoing o, long remainingMillis) {
        try {
            if (!o.forwarding.tryLock(Math.max(0, remainingMillis - 100), TimeUnit.MILLISECONDS)) {
                throw new PsException(PsException.Code.CLOSED, "the push was not applied: the pushes forwarded to "
                        + "the move's target " + o.target().address() + " ahead of it took its whole deadline");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new PsException(PsException.Code.CLOSED, "the push was not applied: interrupted");
        }
    }

    /**
     * After a push was applied here (under {@code o.forwarding}): sends the updated whole rows
     * of {@code moved[0, m)} (all in groups of move {@code o}) to the new owner, and returns once it has them, or once the move
     * was cancelled while this server still owns the groups.
     *
     * @throws PsException {@code WRONG_SERVER} if the new owner owns them already (the push must
     *                     be retried there); {@code CLOSED} if the call's deadline came first
     */
    private void forward(Outgoing o, SparseTable table, long[] moved, int m, long remainingMillis, long dedupe) {
        // A forward carries its push's dedupe id (in the generation field): the new owner records it
        // with the rows, so that a client's retry there after a failover is not applied twice.
        byte[] body = UnsentForwards.rowsBody(o.id(), table, java.util.Arrays.copyOf(moved, m), dedupe);
        sendForward(o, PsDescriptor.MOVE_ROWS, "rows", body, remainingMillis, () -> o.unsent.rows(table, moved, m, dedupe));
    }

    /**
     * Sends a forward ({@code what}: the moved rows, or a dense tensor's row) to the move's
     * target until it is taken, the move is cancelled, or the call's deadline comes.
     *
     * @throws PsException {@code WRONG_SERVER} if the target owns the groups already and never
     *                     saw this push (the push must be retried there); {@code CLOSED} if an
     *                     earlier attempt may have been merged there, or the deadline came first
     */
    private void sendForward(Outgoing o, RpcMethod method, String what, byte[] body, long remainingMillis,
            Runnable ifOutOfTime) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, remainingMillis - 100));
        boolean unknown = false; // an earlier attempt may have been merged there
        while (true) {
            RuntimeException unreachable;
            // First the pushes whose forward ran out of time: this body may carry their effect.
            if (!o.unsent.flush(o.id(), f -> send(o.target(), f.method(), f.body()))) {
                unreachable = new IllegalStateException("the pushes whose forward ran out of time could not be sent "
                        + "again first"); // this body was not sent: nothing more is unknown
            } else {
                try {
                    java.util.function.Predicate<byte[]> fault = forwardFault;
                    if (fault != null && fault.test(body)) {
                        throw new IllegalStateException("no answer (a test's fault)");
                    }
                    send(o.target(), method, body);
                    return;
                } catch (RuntimeException e) {
                    unreachable = e;
                }
                if (unreachable instanceof PsException e && e.code() == PsException.Code.WRONG_SERVER) {
                    if (unknown) {
                        throw new PsException(PsException.Code.CLOSED, "the push was applied and may be in the " + what
                                + " of the move's target " + o.target().address() + ", which owns them now: "
                                + "an earlier copy got no answer; not retried, so as not to apply it twice");
                    }
                    // Fenced: the target owns the groups now and never saw this push.
                    RoutingTable t = server.routingTable();
                    throw PsDescriptor.wrongServer(t == null ? -1 : t.generation(), "the push's groups moved to "
                            + o.target().address() + "; this push was not acknowledged here: " + e.getMessage());
                }
                unknown |= !(unreachable instanceof PsException);
            }
            if (o.ended && ownsStill(o)) {
                return; // cancelled: the groups stay here, and so does the push
            }
            if (System.nanoTime() > deadline) {
                // Applied here, maybe not there: its rows go again with its id before any later copy of them.
                ifOutOfTime.run();
                throw new PsException(PsException.Code.CLOSED, "the push was applied but its " + what
                        + " could not be copied to the move's target " + o.target().address() + " in time: "
                        + unreachable.getMessage());
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                throw new PsException(PsException.Code.CLOSED, "interrupted while forwarding a push");
            }
        }
    }

    private boolean ownsStill(Outgoing o) {
        RoutingTable t = server.routingTable();
        int self = server.index();
        return t != null && self >= 0 && t.ownerOfGroup(o.firstGroup) == self;
    }

    @Override
    public synchronized void close() {
        if (peers != null) {
            peers.close();
            peers = null;
        }
    }

    private synchronized RpcChannel channel(String address, TransportConfig transport) {
        if (peers == null) {
            if (transport == null) {
                throw new IllegalStateException("the server listens on no transport");
            }
            peers = RpcClient.open(config, transport);
        }
        return peers.channel(address);
    }

    private static byte[] beginBody(long moveId, int[] groups, List<SparseTable> tables) {
        List<byte[]> creates = new ArrayList<>();
        long bytes = PsDescriptor.payloadOffset(0) + ((4L * groups.length + 7) & ~7L) + 8;
        for (SparseTable t : tables) {
            byte[] name = PsDescriptor.nameBytes(t.name());
            byte[] create = new byte[PsDescriptor.createBytes(name.length)];
            PsDescriptor.writeCreate(MemorySegment.ofArray(create), name, t.config());
            creates.add(create);
            bytes += 8 + ((create.length + 7) & ~7L);
        }
        byte[] body = new byte[Math.toIntExact(bytes)];
        MemorySegment s = MemorySegment.ofArray(body);
        long at = PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, new byte[0], 0, groups.length, 0);
        PsDescriptor.stamp(s, 0, moveId);
        for (int i = 0; i < groups.length; i++) {
            s.set(PsDescriptor.INT, at + 4L * i, groups[i]);
        }
        at += (4L * groups.length + 7) & ~7L;
        s.set(PsDescriptor.INT, at, creates.size());
        at += 8;
        for (byte[] create : creates) {
            s.set(PsDescriptor.INT, at, create.length);
            MemorySegment.copy(MemorySegment.ofArray(create), 0, s, at + 8, create.length);
            at += 8 + ((create.length + 7) & ~7L);
        }
        return body;
    }

    /** {@code MOVE_DEDUPE}: the dedupe ids recorded here for the moving groups. */
    private byte[] dedupeBody(long moveId, int[] groups) {
        List<long[]> entries = new ArrayList<>();
        for (int g : groups) {
            for (long d : window.ids(g)) {
                entries.add(new long[] {g, d});
            }
        }
        int at = PsDescriptor.payloadOffset(0);
        byte[] body = new byte[at + entries.size() * ReplicationDescriptor.GROUP_ENTRY];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, new byte[0], 0, entries.size(), 0);
        PsDescriptor.stamp(s, 0, moveId);
        for (int i = 0; i < entries.size(); i++) {
            ReplicationDescriptor.writeGroup(s, at, i, (int) entries.get(i)[0], entries.get(i)[1]);
        }
        return body;
    }

    private static byte[] rowsBody(long moveId, byte[] name, int dimension, int count, MemorySegment rows) {
        int at = PsDescriptor.payloadOffset(name.length);
        byte[] body = new byte[Math.toIntExact(at + rows.byteSize())];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, name, dimension, count, 0);
        PsDescriptor.stamp(s, 0, moveId);
        MemorySegment.copy(rows, 0, s, at, rows.byteSize());
        return body;
    }

    /** One blocking call; the server's refusals come back as {@link PsException}s. */
    private static void send(RpcChannel target, RpcMethod method, byte[] body) {
        RequestWriter writer = segment -> MemorySegment.copy(MemorySegment.ofArray(body), 0, segment, 0, body.length);
        try {
            RpcResponse response = target.call(method, body.length, writer, CALL_MILLIS).get(CALL_MILLIS + 1_000,
                    TimeUnit.MILLISECONDS);
            response.release();
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RemoteException remote) {
                PsException ps = PsDescriptor.toPsException(remote, target.address());
                if (ps != null) {
                    throw ps;
                }
            }
            throw cause instanceof RuntimeException r ? r : new IllegalStateException(cause);
        } catch (TimeoutException e) {
            throw new IllegalStateException("no answer from " + target.address() + " in time", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }
}
