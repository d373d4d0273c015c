package dev.ferry.rpc;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.TransportException;

/**
 * One call as its handler sees it: the request (a view of the registered receive buffer), the
 * reply buffer it encodes into (a registered send buffer), the caller's identity and deadline.
 * Used by one thread, during {@link RpcHandler#handle}.
 */
public final class ServerCall {

    private final Peer peer;
    private final RpcMethod method;
    private final long clientId;
    private final long callId;
    private final long deadlineNanos;
    private final InboundMessage request;
    private final boolean inline;
    private volatile boolean cancelled;
    OutboundMessage reply;
    /**
     * A heap reply, when an inline handler found the send pool empty (it must not wait on it) or
     * the caller's link failed.
     */
    MemorySegment heapReply;
    private int replyLength = -1;

    ServerCall(Peer peer, RpcMethod method, long clientId, long callId, long deadlineNanos, InboundMessage request,
            boolean inline) {
        this.peer = peer;
        this.method = method;
        this.clientId = clientId;
        this.callId = callId;
        this.deadlineNanos = deadlineNanos;
        this.request = request;
        this.inline = inline;
    }

    /** The method id. */
    public int method() {
        return method.id();
    }

    /** The calling client (stable across its reconnects). */
    public long clientId() {
        return clientId;
    }

    /** The call id, unique per client; a retried call keeps it. */
    public long callId() {
        return callId;
    }

    /** The address of the peer the request came from. */
    public String peer() {
        return peer.address();
    }

    /** The request body: a read-only view of the receive buffer, valid until the handler returns. */
    public MemorySegment request() {
        return RpcDescriptor.body(request.segment());
    }

    /** Milliseconds left before the caller gives up (negative once passed). */
    public long remainingMillis() {
        return TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
    }

    /** True once the caller cancelled the call (best effort: the notice may arrive late or never). */
    public boolean isCancelled() {
        return cancelled;
    }

    void cancel() {
        cancelled = true;
    }

    /**
     * Takes the response buffer, {@code length} bytes, to encode the response into; once per
     * call. A handler that never calls it answers with an empty body.
     */
    public MemorySegment reply(int length) {
        if (replyLength >= 0) {
            throw new IllegalStateException("reply already taken for call " + callId);
        }
        if (length < 0) {
            throw new IllegalArgumentException("negative reply length " + length);
        }
        replyLength = length;
        OutboundMessage message;
        try {
            message = inline ? peer.tryAllocate(RpcDescriptor.HEADER + length)
                    : peer.allocate(RpcDescriptor.HEADER + length);
        } catch (TransportException e) {
            boolean peerGone = switch (e.reason()) {
                case PEER_FAILED, CLOSED -> true;
                case UNSPECIFIED -> !peer.isOpen();
                default -> false;
            };
            if (!peerGone) {
                throw e;
            }
            // The caller's link failed under the handler. The call still completes: its outcome
            // goes to the heap, and from there to the caller's retry on its next link.
            message = null;
        }
        if (message == null) {
            heapReply = Arena.ofAuto().allocate(RpcDescriptor.HEADER + (long) length);
            return RpcDescriptor.body(heapReply);
        }
        reply = message;
        return RpcDescriptor.body(message.segment());
    }

    /** Shrinks the reply to its first {@code length} bytes, for encoders that over-allocate. */
    public void truncateReply(int length) {
        if (replyLength < 0 || length < 0 || length > replyLength) {
            throw new IllegalArgumentException("cannot truncate a reply of " + replyLength + " bytes to " + length);
        }
        replyLength = length;
        if (reply != null) {
            reply.truncate(RpcDescriptor.HEADER + length);
        } else {
            heapReply = heapReply.asSlice(0, RpcDescriptor.HEADER + length);
        }
    }

    boolean hasReply() {
        return replyLength >= 0;
    }

    Peer from() {
        return peer;
    }

    RpcMethod rpcMethod() {
        return method;
    }

    long deadlineNanos() {
        return deadlineNanos;
    }

    InboundMessage requestMessage() {
        return request;
    }

    boolean inline() {
        return inline;
    }

    /** Drops an unsent reply buffer. */
    void discardReply() {
        if (reply != null) {
            reply.release();
            reply = null;
        }
        heapReply = null;
    }
}
