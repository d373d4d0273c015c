package dev.ferry.rpc;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;

/**
 * Runs a registered handler on a request body without a transport: the request is a native
 * segment of exactly the header and the body (so a read past it throws), and the reply goes to
 * the heap. For fuzzing the request decoders of servers built on {@link RpcServer}.
 */
public final class ServerCalls {

    private static final Peer NOWHERE = new Peer() {
        @Override
        public String address() {
            return "fuzzer:0";
        }

        @Override
        public OutboundMessage allocate(int length) {
            return null;
        }

        @Override
        public OutboundMessage tryAllocate(int length) {
            return null; // an inline call then replies on the heap
        }

        @Override
        public CompletableFuture<Void> send(int stream, OutboundMessage message) {
            throw new UnsupportedOperationException();
        }

        @Override
        public boolean trySend(int stream, OutboundMessage message) {
            throw new UnsupportedOperationException();
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    };

    private ServerCalls() {
    }

    /**
     * Calls the handler {@code server} registered for {@code method} with {@code body}.
     *
     * @return the reply body the handler wrote (empty if it took none)
     * @throws IllegalArgumentException if no handler is registered for the method
     * @throws Exception whatever the handler throws
     */
    public static byte[] call(RpcServer server, RpcMethod method, byte[] body) throws Exception {
        RpcHandler handler = server.handler(method.id());
        if (handler == null) {
            throw new IllegalArgumentException("no handler for method " + method.id());
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment frame = arena.allocate(RpcDescriptor.HEADER + (long) body.length);
            RpcDescriptor.write(frame, RpcDescriptor.REQUEST, (byte) 0, method.id(), 1, 1, 1_000_000, 0);
            MemorySegment.copy(body, 0, frame, ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
            InboundMessage request = new InboundMessage() {
                @Override
                public int stream() {
                    return 0;
                }

                @Override
                public MemorySegment segment() {
                    return frame;
                }

                @Override
                public void release() {
                }
            };
            ServerCall call = new ServerCall(NOWHERE, method, 1, 1, System.nanoTime() + 1_000_000_000L, request, true);
            handler.handle(call);
            return call.heapReply == null ? new byte[0] : RpcDescriptor.body(call.heapReply).toArray(ValueLayout.JAVA_BYTE);
        }
    }
}
