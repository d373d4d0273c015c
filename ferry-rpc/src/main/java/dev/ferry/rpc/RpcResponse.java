package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;

import dev.ferry.transport.InboundMessage;

/**
 * A response: a view of the transport's receive buffer that it arrived in. The buffer is the
 * receiver's flow-control capacity, so {@link #release() release} it (or close it) promptly;
 * a client holding responses slows the servers' replies down.
 */
public final class RpcResponse implements AutoCloseable {

    private final InboundMessage message;
    private final boolean replayed;

    RpcResponse(InboundMessage message) {
        this.message = message;
        this.replayed = (RpcDescriptor.flags(message.segment()) & RpcDescriptor.FLAG_REPLAYED) != 0;
    }

    /** The response body, valid until {@link #release()}. */
    public MemorySegment segment() {
        return RpcDescriptor.body(message.segment());
    }

    /** True if the server answered a retry from its deduplication table rather than by running the handler. */
    public boolean replayed() {
        return replayed;
    }

    /** Gives the receive buffer back; exactly once. */
    public void release() {
        message.release();
    }

    /** Same as {@link #release()}. */
    @Override
    public void close() {
        release();
    }
}
