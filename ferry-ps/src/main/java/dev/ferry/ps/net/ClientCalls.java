package dev.ferry.ps.net;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.CallGroup;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RequestWriter;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcException;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;

/**
 * The client's calls to servers by address: one {@link RpcChannel} per server, and a server's
 * refusals turned into the {@link PsException} it sent, naming the server. Thread-safe.
 */
final class ClientCalls {

    private final RpcClient rpc;
    private final ConcurrentHashMap<String, RpcChannel> channelsByAddress = new ConcurrentHashMap<>();

    ClientCalls(RpcClient rpc) {
        this.rpc = rpc;
    }

    RpcClient rpc() {
        return rpc;
    }

    /** A call to server {@code server} of a route whose failures are mapped to {@link PsException}s where they are the server's. */
    CompletableFuture<RpcResponse> call(Route r, int server, RpcMethod method, int length, RequestWriter writer) {
        return call(r.addresses().get(server), method, length, writer);
    }

    /** A call to the server at {@code address}, failures mapped as {@link #call(Route, int, RpcMethod, int, RequestWriter)}. */
    CompletableFuture<RpcResponse> call(String address, RpcMethod method, int length, RequestWriter writer) {
        return channel(address).call(method, length, writer).exceptionallyCompose(
                failure -> CompletableFuture.failedFuture(map(failure, address)));
    }

    /** {@link #call(Route, int, RpcMethod, int, RequestWriter)} with its own deadline (a retry's). */
    CompletableFuture<RpcResponse> call(Route r, int server, RpcMethod method, int length, RequestWriter writer,
            long deadlineMillis) {
        String address = r.addresses().get(server);
        return channel(address).call(method, length, writer, deadlineMillis).exceptionallyCompose(
                failure -> CompletableFuture.failedFuture(map(failure, address)));
    }

    /**
     * A call to the server at {@code address} with no stage after the RPC's own future: for a
     * caller that waits and maps a failure itself ({@link #map}), so that the thread completing
     * the call has nothing to run but the waiter's wake-up; the call counts in {@code group},
     * which the calling thread owns.
     */
    CompletableFuture<RpcResponse> rawCall(String address, RpcMethod method, int length, RequestWriter writer,
            CallGroup group) {
        return channel(address).call(method, length, writer, group);
    }

    /** The channel to the server at {@code address}, opened on first use; no method reference made once it exists. */
    private RpcChannel channel(String address) {
        RpcChannel channel = channelsByAddress.get(address);
        return channel != null ? channel : channelsByAddress.computeIfAbsent(address, rpc::channel);
    }

    static Throwable map(Throwable failure, String address) {
        Throwable cause = unwrap(failure);
        if (cause instanceof RemoteException remote) {
            PsException ps = PsDescriptor.toPsException(remote, address);
            if (ps != null) {
                return ps;
            }
        }
        return cause;
    }

    static Throwable unwrap(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    static int bodyLength(long bytes) {
        if (bytes > Integer.MAX_VALUE) {
            throw new PsException(PsException.Code.REQUEST_TOO_LARGE, "a request of " + bytes
                    + " bytes is too large for one message; lower the server's request limits");
        }
        return (int) bytes;
    }

    /** Waits for every call, releases the responses, and fails with the first failure. */
    static CompletableFuture<Void> releaseAll(List<CompletableFuture<RpcResponse>> calls) {
        CompletableFuture<?>[] released = new CompletableFuture<?>[calls.size()];
        for (int i = 0; i < released.length; i++) {
            released[i] = calls.get(i).thenAccept(RpcResponse::release);
        }
        return CompletableFuture.allOf(released);
    }

    /** The result of a future, its failure rethrown as the unchecked exception it is. */
    static <T> T join(CompletableFuture<T> future) {
        try {
            return future.get();
        } catch (ExecutionException e) {
            Throwable cause = unwrap(e.getCause());
            if (cause instanceof RuntimeException r) {
                throw r;
            }
            throw new RpcException(String.valueOf(cause), cause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            future.cancel(false);
            throw new RpcException("interrupted", e);
        }
    }
}
