package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.List;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcResponse;

/** Pulls and pushes of whole dense tensors, each at the one server that owns its name. Thread-safe. */
final class DenseCalls {

    private final ClientCalls servers;
    private final RoutingFollower routing;
    private final TableDirectory directory;

    DenseCalls(ClientCalls servers, RoutingFollower routing, TableDirectory directory) {
        this.servers = servers;
        this.routing = routing;
        this.directory = directory;
    }

    /** The whole dense tensor. */
    float[] pull(String tensor) {
        int length = directory.denseLength(tensor);
        float[] out = new float[length];
        byte[] name = PsDescriptor.nameBytes(tensor);
        Route r = routing.route();
        try (RpcResponse resp = ClientCalls.join(servers.call(r, TableDirectory.denseOwner(r, tensor), PsDescriptor.DENSE_PULL,
                PsDescriptor.payloadOffset(name.length), body -> {
                    PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                    PsDescriptor.stamp(body, r.generation(), 0);
                }))) {
            if (resp.segment().byteSize() != (long) length * Float.BYTES) {
                throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + tensor + "' came back with "
                        + resp.segment().byteSize() + " bytes for " + length + " weights");
            }
            MemorySegment.copy(resp.segment(), 0, MemorySegment.ofArray(out), 0, (long) length * Float.BYTES);
        }
        return out;
    }

    /** One optimizer step on the whole dense tensor with {@code gradients} (its length). */
    void push(String tensor, float[] gradients) {
        int length = directory.denseLength(tensor);
        if (gradients.length != length) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + tensor + "' has " + length
                    + " weights; got " + gradients.length + " gradients");
        }
        byte[] name = PsDescriptor.nameBytes(tensor);
        long bytes = (long) length * Float.BYTES;
        Route r = routing.route();
        ClientCalls.join(ClientCalls.releaseAll(List.of(servers.call(r, TableDirectory.denseOwner(r, tensor), PsDescriptor.DENSE_PUSH,
                ClientCalls.bodyLength(PsDescriptor.payloadOffset(name.length) + bytes), body -> {
                    int at = PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                    PsDescriptor.stamp(body, r.generation(), 0);
                    MemorySegment.copy(MemorySegment.ofArray(gradients), 0, body, at, bytes);
                }))));
    }
}
