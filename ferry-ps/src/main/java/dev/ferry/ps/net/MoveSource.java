package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantReadWriteLock;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableStats;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
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
 * then meets the fence is answered {@code UNCONFIRMED}, never {@code WRONG_SERVER}: the push may be
 * in the new owner's rows, with its dedupe id (the target records a forward's id with its rows),
 * so only a client whose servers dedupe sends it again, and there it counts once.
 */
final class MoveSource implements AutoCloseable {

    /** Bytes of rows per {@code MOVE_ROWS} message of the snapshot. */
    private static final long RUN_BYTES = 1 << 20;

    private final ParameterServer ps;
    private final PsServer server;
    private final RpcConfig config;
    private final DedupeWindow window;
    /** Read: a push from its ownership check to its forward. Write: a move starting. */
    final ReentrantReadWriteLock barrier = new ReentrantReadWriteLock();
    private volatile OutgoingMove outgoing;
    private RpcClient peers;

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
            MoveCalls.send(target, PsDescriptor.MOVE_BEGIN, MoveCalls.beginBody(moveId, groups, tables));
            OutgoingMove o = new OutgoingMove(moveId, moving, groups[0], target);
            byte[] dedupe;
            barrier.writeLock().lock();
            try {
                outgoing = o;
                // The dedupe ids of every push applied so far: later ones travel with their forwards.
                dedupe = MoveCalls.dedupeBody(moveId, groups, window);
            } finally {
                barrier.writeLock().unlock();
            }
            MoveCalls.send(target, ReplicationDescriptor.MOVE_DEDUPE, dedupe);
            for (SparseTable table : tables) {
                byte[] name = PsDescriptor.nameBytes(table.name());
                long rowBytes = RowTransfer.rowBytes(table);
                RowTransfer.export(table, id -> moving[RoutingTable.groupOf(id)], RUN_BYTES, o.forwarding, rows -> {
                    int count = (int) (rows.byteSize() / rowBytes);
                    MoveCalls.send(target, PsDescriptor.MOVE_ROWS,
                            MoveCalls.rowsBody(moveId, name, table.dimension(), count, rows));
                });
            }
            sendDense(o, moving);
            // Before the move reports ready: a snapshot shard copied after a push whose forward ran
            // out of time carries its effect; its id must be there too before the flip.
            o.forwarding.lock();
            try {
                if (!o.unsent.flush(moveId, f -> MoveCalls.send(target, f.method(), f.body()))) {
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
    private void sendDense(OutgoingMove o, boolean[] moving) {
        for (TableStats stats : ps.stats()) {
            DenseTensor tensor = denseOrNull(stats.name());
            if (tensor == null || !moving[DenseMove.groupOf(tensor.name())]) {
                continue;
            }
            o.forwarding.lock();
            try {
                MoveCalls.send(o.target, DenseMove.MOVE_DENSE, DenseMove.body(o.id, tensor, 0, true));
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
        OutgoingMove o = outgoing;
        if (o == null || !o.moves(DenseMove.groupOf(tensor.name()))) {
            DenseMove.apply(tensor, gradients, dedupe, window);
            return;
        }
        long waitStart = System.nanoTime();
        o.lockForwarding(remainingMillis);
        long left = remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart);
        try {
            DenseMove.apply(tensor, gradients, dedupe, window);
            o.sendForward(server, DenseMove.MOVE_DENSE, "tensor", DenseMove.body(o.id, tensor, dedupe, false),
                    left, forwardFault,
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
        OutgoingMove o = outgoing;
        if (o == null || !o.moves(DenseMove.groupOf(tensor.name()))) {
            return;
        }
        long waitStart = System.nanoTime();
        o.lockForwarding(remainingMillis);
        try {
            o.sendForward(server, DenseMove.MOVE_DENSE, "tensor", DenseMove.body(o.id, tensor, 0, false),
                    remainingMillis - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - waitStart), forwardFault,
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
        OutgoingMove o = outgoing;
        if (o == null || o.id != moveId) {
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
    private void clear(OutgoingMove o) {
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
        OutgoingMove o = outgoing;
        return o != null && o.moves(group);
    }

    /** The move being sent, or -1. */
    long moving() {
        OutgoingMove o = outgoing;
        return o == null ? -1 : o.id;
    }

    /**
     * Applies a push that touches a moving group, in two steps, or returns false (and does nothing)
     * if it touches none: first the ids of moving groups, whose updated rows are then forwarded
     * ({@link #forward}); only then the other ids. So a push refused because the groups flipped
     * meanwhile changed nothing that this server still owns, and its client may retry all of it.
     */
    boolean pushMoving(String name, int dimension, long[] ids, int count, MemorySegment gradients,
            long remainingMillis, long dedupe) {
        OutgoingMove o = outgoing;
        if (o == null) {
            return false;
        }
        int moving = 0;
        for (int i = 0; i < count; i++) {
            if (o.moves(RoutingTable.groupOf(ids[i]))) {
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
            int to = o.moves(RoutingTable.groupOf(ids[i])) ? first++ : rest++;
            order[to] = ids[i];
            MemorySegment.copy(gradients, i * rowBytes, grads, to * rowBytes, rowBytes);
        }
        SparseTable table = ps.table(name);
        long waitStart = System.nanoTime();
        o.lockForwarding(remainingMillis);
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
        OutgoingMove o = outgoing;
        if (o == null) {
            return;
        }
        int moving = 0;
        for (int i = 0; i < count; i++) {
            moving += o.moves(RoutingTable.groupOf(ids[i])) ? 1 : 0;
        }
        if (moving == 0) {
            return;
        }
        long[] moved = new long[moving];
        moving = 0;
        for (int i = 0; i < count; i++) {
            if (o.moves(RoutingTable.groupOf(ids[i]))) {
                moved[moving++] = ids[i];
            }
        }
        long waitStart = System.nanoTime();
        o.lockForwarding(remainingMillis);
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

    /**
     * After a push was applied here (under {@code o.forwarding}): sends the updated whole rows
     * of {@code moved[0, m)} (all in groups of move {@code o}) to the new owner, and returns once it has them, or once the move
     * was cancelled while this server still owns the groups.
     *
     * @throws PsException {@code WRONG_SERVER} if the new owner owns them already (the push must
     *                     be retried there); {@code CLOSED} if the call's deadline came first
     */
    private void forward(OutgoingMove o, SparseTable table, long[] moved, int m, long remainingMillis, long dedupe) {
        // A forward carries its push's dedupe id (in the generation field): the new owner records it
        // with the rows, so that a client's retry there after a failover is not applied twice.
        byte[] body = UnsentForwards.rowsBody(o.id, table, java.util.Arrays.copyOf(moved, m), dedupe);
        o.sendForward(server, PsDescriptor.MOVE_ROWS, "rows", body, remainingMillis, forwardFault,
                () -> o.unsent.rows(table, moved, m, dedupe));
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
}
