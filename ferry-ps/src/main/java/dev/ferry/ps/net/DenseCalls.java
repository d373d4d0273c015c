package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.Slots;
import dev.ferry.rpc.RpcResponse;

/**
 * Pulls and pushes of whole dense tensors, each at the server that owns its name's slot group
 * in the client's table. A tensor moves with its group ({@link DenseMove}): a server that does
 * not own it (any more) answers {@code WRONG_SERVER}, and the call is retried with a fresh
 * table as a sparse part is ({@link RetryPolicy}); a push with the same dedupe id, so that the
 * server drops a retry of a push it applied already. Thread-safe.
 */
final class DenseCalls {

    /** Sets dense pushes' dedupe ids apart from the sparse ones of the same client ({@code BatchParts}). */
    private static final long DENSE_BIT = 1L << 62;

    private final ClientCalls servers;
    private final RoutingFollower routing;
    private final TableDirectory directory;
    private final RetryPolicy retry;
    private final AtomicLong pushSequence = new AtomicLong();

    DenseCalls(ClientCalls servers, RoutingFollower routing, TableDirectory directory, RetryPolicy retry) {
        this.servers = servers;
        this.routing = routing;
        this.directory = directory;
        this.retry = retry;
    }

    /** Creates a dense tensor at the server that owns its name, following the table if it moved. */
    void create(DenseConfig tensor) {
        long giveUpAt = 0;
        for (int attempt = 0; ; attempt++) {
            String owner = ownerAddress(routing.route(), tensor.name());
            try {
                directory.createDense(tensor);
                return;
            } catch (RuntimeException e) {
                // A refusal, or a timeout where the servers are a controller's members: they take
                // the same tensor created again as done (after a lost answer it may exist already).
                giveUpAt = attempt == 0 ? retry.start() : giveUpAt;
                if (!retry.retryable(e, false, attempt, giveUpAt)) {
                    throw e;
                }
                ClientCalls.join(retry.pause(e, attempt, owner, PsDescriptor.denseKey(tensor.name()), giveUpAt));
            }
        }
    }

    /** The whole dense tensor. */
    float[] pull(String tensor) {
        int length = directory.denseLength(tensor);
        float[] out = new float[length];
        byte[] name = PsDescriptor.nameBytes(tensor);
        long giveUpAt = 0;
        for (int attempt = 0; ; attempt++) {
            Route r = routing.route();
            try (RpcResponse resp = ClientCalls.join(servers.call(r, TableDirectory.denseOwner(r, tensor),
                    PsDescriptor.DENSE_PULL, PsDescriptor.payloadOffset(name.length), body -> {
                        PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                        PsDescriptor.stamp(body, r.generation(), 0);
                    }))) {
                if (resp.segment().byteSize() != (long) length * Float.BYTES) {
                    throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + tensor + "' came back with "
                            + resp.segment().byteSize() + " bytes for " + length + " weights");
                }
                MemorySegment.copy(resp.segment(), 0, MemorySegment.ofArray(out), 0, (long) length * Float.BYTES);
                return out;
            } catch (RuntimeException e) {
                giveUpAt = attempt == 0 ? retry.start() : giveUpAt;
                if (!retry.retryable(e, true, attempt, giveUpAt)) {
                    throw e;
                }
                ClientCalls.join(retry.pause(e, attempt, ownerAddress(r, tensor), PsDescriptor.denseKey(tensor),
                        giveUpAt));
            }
        }
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
        long dedupe = Slots.mix(servers.rpc().clientId()) ^ (DENSE_BIT | pushSequence.incrementAndGet());
        long giveUpAt = 0;
        for (int attempt = 0; ; attempt++) {
            Route r = routing.route();
            try {
                ClientCalls.join(ClientCalls.releaseAll(List.of(servers.call(r, TableDirectory.denseOwner(r, tensor),
                        PsDescriptor.DENSE_PUSH, ClientCalls.bodyLength(PsDescriptor.payloadOffset(name.length) + bytes),
                        body -> {
                            int at = PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, length, length, 0);
                            PsDescriptor.stamp(body, r.generation(), dedupe);
                            MemorySegment.copy(MemorySegment.ofArray(gradients), 0, body, at, bytes);
                        }))));
                return;
            } catch (RuntimeException e) {
                giveUpAt = attempt == 0 ? retry.start() : giveUpAt;
                if (!retry.retryable(e, false, attempt, giveUpAt)) {
                    throw e;
                }
                ClientCalls.join(retry.pause(e, attempt, ownerAddress(r, tensor), PsDescriptor.denseKey(tensor),
                        giveUpAt));
            }
        }
    }

    /** The address of the server that owns {@code tensor} in {@code r}. */
    private static String ownerAddress(Route r, String tensor) {
        return r.addresses().get(TableDirectory.denseOwner(r, tensor));
    }
}
