package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.DenseTransfer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcMethod;

/**
 * Dense tensors that move with their slot group. A tensor belongs to the group of its name's
 * key ({@link PsDescriptor#denseKey}); when that group moves, the old owner sends the tensor's
 * whole row (weights, optimizer state, step count) to the new owner as part of the snapshot, and
 * again after every push it applies meanwhile ({@link MoveSource#pushDense}), exactly as whole
 * sparse rows are forwarded. The new owner ({@link MoveTarget#dense}) creates the tensor if it
 * lacks it and keeps the copy with the most steps; the snapshot's copy replaces whatever stale
 * copy it held. The old owner sends one at a time, under the move's forwarding lock, and waits
 * for each answer, so the new owner sees them in the order they were copied.
 *
 * <p>A dense push carries a dedupe id: the server that applies it records it in the group's
 * {@link DedupeWindow} and a forward carries it to the new owner, so a client's retry of an
 * applied push (after a lost answer) is acknowledged without being applied twice.
 *
 * <p>{@code MOVE_DENSE} body: the header (kind {@code DENSE}, the tensor's name, its length,
 * count 1, offset 1 for the snapshot's copy, 0 for a forward), the push's dedupe id in the
 * generation field and the move id in the dedupe field (as {@code MOVE_ROWS}), then the tensor's
 * {@code CREATE_TABLE} body (an int length, 4 bytes of padding, the bytes padded to 8), then its
 * whole row.
 */
final class DenseMove {

    /** One dense tensor's whole row during a move: old owner to new owner. */
    static final RpcMethod MOVE_DENSE = RpcMethod.idempotent(0x5201);

    private DenseMove() {
    }

    /** The slot group a dense tensor belongs to. */
    static int groupOf(String tensor) {
        return RoutingTable.groupOf(PsDescriptor.denseKey(tensor));
    }

    /**
     * Applies a push to {@code tensor} unless push {@code dedupe} was applied to its group
     * already (a client's retry), then records it; returns whether it applied it.
     */
    static boolean apply(DenseTensor tensor, MemorySegment gradients, long dedupe, DedupeWindow window) {
        int group = groupOf(tensor.name());
        // One push of a tensor at a time from the check to the record: a retry racing its first
        // attempt finds it recorded. Steps are serialized by the tensor's own lock anyway.
        synchronized (tensor) {
            if (window.contains(group, dedupe)) {
                return false;
            }
            tensor.apply(gradients);
            if (dedupe != 0) {
                window.record(group, dedupe);
            }
            return true;
        }
    }

    /** A {@code MOVE_DENSE} body with the whole row of {@code tensor} as it is now. */
    static byte[] body(long moveId, DenseTensor tensor, long dedupe, boolean snapshot) {
        byte[] name = PsDescriptor.nameBytes(tensor.name());
        byte[] create = new byte[PsDescriptor.createBytes(name.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(create), name, tensor.config());
        long padded = (create.length + 7) & ~7L;
        long rowBytes = DenseTransfer.rowBytes(tensor);
        int at = PsDescriptor.payloadOffset(name.length);
        byte[] body = new byte[Math.toIntExact(at + 8 + padded + rowBytes)];
        MemorySegment s = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(s, PsDescriptor.DENSE, name, tensor.config().length(), 1, snapshot ? 1 : 0);
        PsDescriptor.stamp(s, dedupe, moveId);
        s.set(PsDescriptor.INT, at, create.length);
        MemorySegment.copy(MemorySegment.ofArray(create), 0, s, at + 8, create.length);
        DenseTransfer.copy(tensor, s.asSlice(at + 8 + padded, rowBytes));
        return body;
    }

    /** A {@code MOVE_DENSE} body read: the tensor, its whole row (a view of the body) and the snapshot flag. */
    record Received(DenseConfig config, MemorySegment row, boolean snapshot) {
    }

    /**
     * Reads a {@code MOVE_DENSE} body, checking every length before it is used.
     *
     * @throws PsException {@code LENGTH_MISMATCH} or {@code INVALID_ARGUMENT} for a malformed body
     */
    static Received read(MemorySegment body) {
        PsDescriptor.checkHeader(body);
        if (PsDescriptor.kind(body) != PsDescriptor.DENSE || PsDescriptor.count(body) != 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "a MOVE_DENSE carries one dense tensor");
        }
        long at = PsDescriptor.payloadOffset(PsDescriptor.nameLength(body));
        CreateAndRow read = readCreateAndRow(body, at, "a MOVE_DENSE");
        return new Received(read.config(), read.row(), PsDescriptor.offset(body) == 1);
    }

    /** A dense tensor's create body and, after it, its whole row, as a message carries them. */
    record CreateAndRow(DenseConfig config, MemorySegment row) {
    }

    /**
     * Reads and checks what {@code body} holds from {@code at}: a create body's length, the create
     * body of the tensor {@code body} names (padded to 8 bytes), and the tensor's whole row to the
     * end; {@code what} names the message in the errors ("a MOVE_DENSE").
     */
    static CreateAndRow readCreateAndRow(MemorySegment body, long at, String what) {
        if (at + 8 > body.byteSize()) {
            throw tooShort(what, body, "its create body's length");
        }
        int length = body.get(PsDescriptor.INT, at);
        long padded = (length + 7L) & ~7L;
        if (length <= 0 || at + 8 + padded > body.byteSize()) {
            throw tooShort(what, body, "a create body of " + length + " bytes");
        }
        MemorySegment create = body.asSlice(at + 8, length);
        PsDescriptor.checkHeader(create);
        if (PsDescriptor.kind(create) != PsDescriptor.DENSE) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, what + " whose create body is not dense");
        }
        DenseConfig config = PsDescriptor.readDense(create);
        if (!config.name().equals(PsDescriptor.name(body))) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, what + " of '" + PsDescriptor.name(body)
                    + "' that creates '" + config.name() + "'");
        }
        long rowAt = at + 8 + padded;
        if (body.byteSize() - rowAt != config.bytes()) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, what + " of " + body.byteSize()
                    + " bytes holds " + (body.byteSize() - rowAt) + " bytes of row; tensor '" + config.name()
                    + "' takes " + config.bytes());
        }
        return new CreateAndRow(config, body.asSlice(rowAt, config.bytes()));
    }

    /** The tensor of {@code config} on {@code ps}, created if it has none. */
    static DenseTensor tensor(ParameterServer ps, DenseConfig config) {
        try {
            return ps.dense(config.name());
        } catch (PsException unknown) {
            if (unknown.code() != PsException.Code.UNKNOWN_TABLE) {
                throw unknown;
            }
        }
        try {
            return ps.createDense(config);
        } catch (PsException exists) {
            if (exists.code() != PsException.Code.TABLE_EXISTS) {
                throw exists;
            }
            return ps.dense(config.name()); // created meanwhile (or a sparse table of that name: it says so)
        }
    }

    /**
     * Drops the dense tensors of {@code groups} that {@code ps} holds (on a move's or copy's
     * target, at its start): stale copies from when it owned or backed them up, possibly of
     * another lineage with more steps, which the merge by steps would keep. The move or copy
     * brings the current copy (snapshot and forwards). Returns how many it dropped.
     */
    static int dropStale(ParameterServer ps, boolean[] groups) {
        int dropped = 0;
        for (var stats : ps.stats()) {
            String name = stats.name();
            if (groups[groupOf(name)] && isDense(ps, name) && ps.dropDense(name)) {
                dropped++;
            }
        }
        return dropped;
    }

    private static boolean isDense(ParameterServer ps, String name) {
        try {
            ps.dense(name);
            return true;
        } catch (PsException sparse) {
            return false;
        }
    }

    private static PsException tooShort(String message, MemorySegment body, String what) {
        return new PsException(PsException.Code.LENGTH_MISMATCH, message + " of " + body.byteSize()
                + " bytes is too short for " + what);
    }
}
