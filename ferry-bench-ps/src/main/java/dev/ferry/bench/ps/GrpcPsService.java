package dev.ferry.bench.ps;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;

import dev.ferry.bench.ps.grpc.proto.ParameterServiceGrpc;
import dev.ferry.bench.ps.grpc.proto.PullRequest;
import dev.ferry.bench.ps.grpc.proto.PullResponse;
import dev.ferry.bench.ps.grpc.proto.PushRequest;
import dev.ferry.bench.ps.grpc.proto.PushResponse;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import io.grpc.Metadata;
import io.grpc.ServerStreamTracer;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;

/**
 * The same pull and push served by a {@link ParameterServer} through gRPC-java, the way a
 * careful team writes it: rows gathered into one byte array that the response wraps without a
 * copy ({@link UnsafeByteOperations}), gradients applied from a view of the request's bytes,
 * and PS errors mapped to status codes.
 */
final class GrpcPsService extends ParameterServiceGrpc.ParameterServiceImplBase {

    private final ParameterServer ps;

    GrpcPsService(ParameterServer ps) {
        this.ps = ps;
    }

    @Override
    public void pull(PullRequest request, StreamObserver<PullResponse> response) {
        try {
            int count = request.getIdsCount();
            long[] ids = new long[count];
            for (int i = 0; i < count; i++) {
                ids[i] = request.getIds(i);
            }
            int dimension = request.getDimension();
            byte[] rows = new byte[count * dimension * Float.BYTES];
            ps.pull(request.getTable(), dimension, ids, 0, count, MemorySegment.ofArray(rows));
            response.onNext(PullResponse.newBuilder().setRows(UnsafeByteOperations.unsafeWrap(rows)).build());
            response.onCompleted();
        } catch (PsException e) {
            response.onError(status(e).asRuntimeException());
        }
    }

    @Override
    public void push(PushRequest request, StreamObserver<PushResponse> response) {
        try {
            int count = request.getIdsCount();
            long[] ids = new long[count];
            for (int i = 0; i < count; i++) {
                ids[i] = request.getIds(i);
            }
            ByteString gradients = request.getGradients();
            MemorySegment view = MemorySegment.ofBuffer(gradients.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN));
            ps.push(request.getTable(), request.getDimension(), ids, 0, count, view);
            response.onNext(PushResponse.getDefaultInstance());
            response.onCompleted();
        } catch (PsException e) {
            response.onError(status(e).asRuntimeException());
        }
    }

    private static Status status(PsException e) {
        Status status = switch (e.code()) {
            case UNKNOWN_TABLE -> Status.NOT_FOUND;
            case READ_ONLY -> Status.FAILED_PRECONDITION;
            case TABLE_FULL -> Status.RESOURCE_EXHAUSTED;
            case CLOSED, BUSY, UNCONFIRMED -> Status.UNAVAILABLE;
            default -> Status.INVALID_ARGUMENT;
        };
        return status.withDescription(e.code() + ": " + e.getMessage());
    }

    /** Counts each call in {@code gauge} from its message's arrival to the close of its stream. */
    static ServerStreamTracer.Factory counting(QueueGauge gauge) {
        return new ServerStreamTracer.Factory() {
            @Override
            public ServerStreamTracer newServerStreamTracer(String fullMethodName, Metadata headers) {
                return new ServerStreamTracer() {
                    private long bytes;
                    private boolean counted;

                    @Override
                    public void inboundWireSize(long size) {
                        synchronized (this) {
                            bytes += size;
                            if (!counted) {
                                counted = true;
                                gauge.arrive(size);
                                return;
                            }
                        }
                        gauge.addBytes(size);
                    }

                    @Override
                    public void streamClosed(Status status) {
                        synchronized (this) {
                            if (counted) {
                                gauge.leave(bytes);
                                counted = false;
                                bytes = 0;
                            }
                        }
                    }
                };
            }
        };
    }
}
