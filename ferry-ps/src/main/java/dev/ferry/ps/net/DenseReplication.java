package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcMethod;

/**
 * The wire layout of dense push replication, primary to backup ({@code REPLICATE_DENSE}): the
 * tensor's whole row (weights, optimizer state, step count: the format of checkpoints and of
 * {@link DenseMove}) after a push, with the push's dedupe id and the primary's epoch of the
 * tensor's group. The backup ({@link ReplicaApplier#receiveDense}) checks the epoch as for
 * sparse rows, creates the tensor if it has none (its {@code CREATE_TABLE} body travels with the
 * row), keeps the copy with the most steps and records the id. Answered as {@code REPLICATE}
 * ({@link ReplicationDescriptor}: a status and the backup's generation). Little-endian.
 *
 * <pre>
 *   PsDescriptor's common header: kind DENSE, the tensor's name, its length,
 *     count = 1, offset = 1 (groups), generation = the primary's routing generation,
 *     dedupe = the push's dedupe id (0: none, the tensor's creation)
 *   | group i32 | 4 reserved | epoch i64 |       one group entry, as REPLICATE's
 *   | create length i32 | 4 reserved | the CREATE_TABLE body, padded to 8 |
 *   the whole row (DenseConfig#bytes)
 * </pre>
 */
final class DenseReplication {

    /** Server to server: a dense tensor's whole row after a push, applied by a backup. */
    static final RpcMethod REPLICATE_DENSE = RpcMethod.idempotent(0x5103);

    private DenseReplication() {
    }

    /** A {@code REPLICATE_DENSE} body with the whole row of {@code tensor} as it is now. */
    static byte[] body(long generation, long dedupe, int group, long epoch, DenseTensor tensor) {
        byte[] name = PsDescriptor.nameBytes(tensor.name());
        byte[] create = new byte[PsDescriptor.createBytes(name.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(create), name, tensor.config());
        long padded = (create.length + 7) & ~7L;
        long rowBytes = DenseTransfer.rowBytes(tensor);
        int at = PsDescriptor.payloadOffset(name.length);
        long createAt = at + ReplicationDescriptor.GROUP_ENTRY;
        byte[] body = new byte[Math.toIntExact(createAt + 8 + padded + rowBytes)];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.DENSE, name, tensor.config().length(), 1, 1);
        PsDescriptor.stamp(s, generation, dedupe);
        ReplicationDescriptor.writeGroup(s, at, 0, group, epoch);
        s.set(PsDescriptor.INT, createAt, create.length);
        MemorySegment.copy(MemorySegment.ofArray(create), 0, s, createAt + 8, create.length);
        DenseTransfer.copy(tensor, s.asSlice(createAt + 8 + padded, rowBytes));
        return body;
    }

    /** A {@code REPLICATE_DENSE} body read: the tensor and its whole row (a view of the body). */
    record Received(DenseConfig config, MemorySegment row) {
    }

    /**
     * Reads a {@code REPLICATE_DENSE} body, checking every length before it is used; its group
     * entry is at {@link ReplicationDescriptor#groupsAt}, as a {@code REPLICATE}'s.
     *
     * @throws PsException {@code LENGTH_MISMATCH} or {@code INVALID_ARGUMENT} for a malformed
     *                     body, or one whose group is not its tensor's
     */
    static Received read(MemorySegment body) {
        PsDescriptor.checkHeader(body);
        if (PsDescriptor.kind(body) != PsDescriptor.DENSE || PsDescriptor.count(body) != 1
                || PsDescriptor.offset(body) != 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a REPLICATE_DENSE carries one dense tensor"
                    + " in one group");
        }
        long at = ReplicationDescriptor.groupsAt(body);
        DenseMove.CreateAndRow read = DenseMove.readCreateAndRow(body, at + ReplicationDescriptor.GROUP_ENTRY,
                "a REPLICATE_DENSE");
        DenseConfig config = read.config();
        int group = ReplicationDescriptor.group(body, at, 0);
        if (group != DenseMove.groupOf(config.name())) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a REPLICATE_DENSE of tensor '" + config.name()
                    + "' (group " + DenseMove.groupOf(config.name()) + ") names group " + group);
        }
        return new Received(config, read.row());
    }

}
