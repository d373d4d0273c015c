package dev.ferry.bench.ps;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import com.google.protobuf.UnsafeByteOperations;

import dev.ferry.bench.ps.grpc.proto.ParameterServiceGrpc;
import dev.ferry.bench.ps.grpc.proto.PullRequest;
import dev.ferry.bench.ps.grpc.proto.PullResponse;
import dev.ferry.bench.ps.grpc.proto.PushRequest;
import dev.ferry.bench.ps.grpc.proto.PushResponse;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;

/**
 * The benchmark's client over gRPC-java: one Netty channel (one HTTP/2 connection) per server,
 * shared by all threads, with the async stub and {@code directExecutor()} so that responses are
 * handled on the event loop without a hand-off, as a latency-minded team configures it.
 */
final class GrpcPsClient extends RoutedClient {

    /** Large pushes and pulls: up to 64 MiB per message, gRPC's default is 4 MiB. */
    static final int MAX_MESSAGE_BYTES = 64 << 20;

    private final ManagedChannel[] channels;
    private final ParameterServiceGrpc.ParameterServiceStub[] stubs;

    GrpcPsClient(List<String> servers) {
        super(servers.size());
        channels = new ManagedChannel[servers.size()];
        stubs = new ParameterServiceGrpc.ParameterServiceStub[servers.size()];
        for (int i = 0; i < channels.length; i++) {
            String address = servers.get(i);
            int colon = address.lastIndexOf(':');
            channels[i] = NettyChannelBuilder
                    .forAddress(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))
                    .usePlaintext()
                    .directExecutor()
                    .maxInboundMessageSize(MAX_MESSAGE_BYTES)
                    .build();
            stubs[i] = ParameterServiceGrpc.newStub(channels[i]);
            channels[i].getState(true);
        }
    }

    @Override
    CompletableFuture<Void> pullPart(int server, String table, int dimension, long[] ids,
            Consumer<MemorySegment> rows) {
        PullRequest.Builder request = PullRequest.newBuilder().setTable(table).setDimension(dimension);
        for (long id : ids) {
            request.addIds(id);
        }
        Reply<PullResponse> reply = new Reply<>(response ->
                rows.accept(MemorySegment.ofBuffer(response.getRows().asReadOnlyByteBuffer())));
        stubs[server].pull(request.build(), reply);
        return reply.future;
    }

    @Override
    CompletableFuture<Void> pushPart(int server, String table, int dimension, long[] ids,
            Consumer<MemorySegment> gradients) {
        PushRequest.Builder request = PushRequest.newBuilder().setTable(table).setDimension(dimension);
        for (long id : ids) {
            request.addIds(id);
        }
        byte[] bytes = new byte[ids.length * dimension * Float.BYTES];
        gradients.accept(MemorySegment.ofArray(bytes));
        request.setGradients(UnsafeByteOperations.unsafeWrap(bytes));
        Reply<PushResponse> reply = new Reply<>(response -> { });
        stubs[server].push(request.build(), reply);
        return reply.future;
    }

    /** Completes a future from a unary call's observer. */
    private static final class Reply<T> implements StreamObserver<T> {
        final CompletableFuture<Void> future = new CompletableFuture<>();
        private final Consumer<T> onValue;

        Reply(Consumer<T> onValue) {
            this.onValue = onValue;
        }

        @Override
        public void onNext(T value) {
            try {
                onValue.accept(value);
            } catch (RuntimeException e) {
                future.completeExceptionally(e);
            }
        }

        @Override
        public void onError(Throwable t) {
            future.completeExceptionally(t);
        }

        @Override
        public void onCompleted() {
            future.complete(null);
        }
    }

    @Override
    public Map<String, Long> counters() {
        return Map.of();
    }

    @Override
    public void close() {
        for (ManagedChannel channel : channels) {
            channel.shutdown();
        }
        for (ManagedChannel channel : channels) {
            try {
                if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
                    channel.shutdownNow();
                }
            } catch (InterruptedException e) {
                channel.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
    }
}
