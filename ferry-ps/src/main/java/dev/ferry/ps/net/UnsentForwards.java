package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;

/**
 * The pushes of one outgoing move whose forward ran out of time ({@code CLOSED}): applied and
 * recorded on the move's source, maybe not on its target. Their effect reaches the target all
 * the same in the next forward of the same rows, or in a snapshot shard copied after them, but
 * without their dedupe id; the client's retry at the target after the flip was then applied
 * twice. So each one's current rows (or tensor) go to the target again with its dedupe id
 * before any later forward, and before the move reports ready ({@link #flush}): the target then
 * holds a push's id whenever it holds its effect. Guarded by the move's forwarding lock.
 */
final class UnsentForwards {

    /** A push applied on the source whose forward got no answer in time: its moving ids, or its tensor. */
    private record Unsent(SparseTable table, long[] ids, DenseTensor tensor, long dedupe) {
    }

    private final ReentrantLock forwarding;
    private final List<Unsent> unsent = new ArrayList<>();

    UnsentForwards(ReentrantLock forwarding) {
        this.forwarding = forwarding;
    }

    /** Push {@code dedupe}'s forward of rows {@code ids} of {@code table} ran out of time. */
    void rows(SparseTable table, long[] ids, int count, long dedupe) {
        assert forwarding.isHeldByCurrentThread();
        unsent.add(new Unsent(table, java.util.Arrays.copyOf(ids, count), null, dedupe));
    }

    /** Push {@code dedupe}'s forward of {@code tensor} ran out of time (0: its creation's). */
    void dense(DenseTensor tensor, long dedupe) {
        assert forwarding.isHeldByCurrentThread();
        unsent.add(new Unsent(null, null, tensor, dedupe));
    }

    /** How many are waiting (tests). */
    int size() {
        return unsent.size();
    }

    /**
     * Sends every waiting push's current rows (or tensor) with its dedupe id, oldest first, by
     * {@code send} (one blocking call: it throws if the target refused or did not answer).
     * Returns true when none is left: all sent, or the target refused them because it owns the
     * groups now or no longer receives the move (it then takes no later forward either, and holds
     * a push's effect exactly when a forward carrying its id got there). Returns false, keeping
     * the rest, if the target could not be reached.
     */
    boolean flush(long moveId, Consumer<Forward> send) {
        assert forwarding.isHeldByCurrentThread();
        while (!unsent.isEmpty()) {
            Unsent u = unsent.getFirst();
            Forward f = u.tensor() != null
                    ? new Forward(DenseMove.MOVE_DENSE, DenseMove.body(moveId, u.tensor(), u.dedupe(), false))
                    : new Forward(PsDescriptor.MOVE_ROWS, rowsBody(moveId, u.table(), u.ids(), u.dedupe()));
            try {
                send.accept(f);
            } catch (PsException refused) {
                if (refused.code() == PsException.Code.WRONG_SERVER
                        || refused.code() == PsException.Code.INVALID_ARGUMENT) {
                    unsent.clear();
                    return true;
                }
                return false;
            } catch (RuntimeException unreachable) {
                return false;
            }
            unsent.removeFirst();
        }
        return true;
    }

    /** One call to the move's target. */
    record Forward(dev.ferry.rpc.RpcMethod method, byte[] body) {
    }

    /** A forward's {@code MOVE_ROWS}: the current whole rows of {@code ids} with push {@code dedupe}'s id. */
    static byte[] rowsBody(long moveId, SparseTable table, long[] ids, long dedupe) {
        long rowBytes = RowTransfer.rowBytes(table);
        MemorySegment rows = MemorySegment.ofArray(new long[(int) (ids.length * rowBytes / Long.BYTES)]);
        RowTransfer.copy(table, ids, ids.length, rows);
        byte[] name = PsDescriptor.nameBytes(table.name());
        int at = PsDescriptor.payloadOffset(name.length);
        byte[] body = new byte[Math.toIntExact(at + rows.byteSize())];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, name, table.dimension(), ids.length, 0);
        // A forward carries its push's dedupe id in the generation field, the move id in the dedupe one.
        PsDescriptor.stamp(s, dedupe, moveId);
        MemorySegment.copy(rows, 0, s, at, rows.byteSize());
        return body;
    }
}
