package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.TransportException;

/**
 * A message or control frame on its way out. Messages are built in place in a registered send
 * buffer: {@link FrameDescriptor#PAYLOAD_OFFSET} bytes of room for the frame, then the payload
 * the application encoded.
 *
 * <p>Message frames are pooled by the transport ({@link FramePool}): the application only
 * ever sees a {@link SendClaim}, which lets go of the frame when it is sent or released, so a
 * stale reference cannot reach the frame's next message.
 */
final class OutboundFrame {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");

    FabricPeer peer;
    RegisteredBuffer buffer;
    /** The payload view; kept across reuse while the frame serves the same buffer and length. */
    private MemorySegment payload;
    private RegisteredBuffer payloadOf;
    int length;
    /** Control frames: type; messages: EAGER, RNDV_REQ or RNDV_SHARED once sent. */
    byte type;
    int stream;
    long cookie;
    Link link;
    /**
     * The send's future, which a thread may wait on: the progress thread then reaps the send's
     * completion soon ({@link SendWindow#awaited}). Null for a send whose completion
     * nobody awaits ({@link FabricPeer#trySend}, {@link FabricPeer#sendAndForget}, {@link
     * FabricPeer#sendWatched}).
     */
    CompletableFuture<Void> future;
    /** What hears of a {@link FabricPeer#sendWatched} send's outcome, late if need be; else null. */
    BiConsumer<? super Void, ? super Throwable> onDone;
    /** The window was taken by trySend. */
    boolean admitted;
    private boolean freed;


    /** A control frame (RNDV_DONE, YIELD or RECLAIM) in a small buffer. */
    static OutboundFrame control(FabricPeer peer, RegisteredBuffer buffer, byte type, long cookie) {
        OutboundFrame frame = new OutboundFrame();
        frame.peer = peer;
        frame.buffer = buffer;
        frame.type = type;
        frame.cookie = cookie;
        return frame;
    }

    /** Prepares a pooled frame for {@code to}'s message of {@code length} bytes in {@code buffer}. */
    void reset(FabricPeer to, RegisteredBuffer buffer, int length) {
        this.peer = to;
        this.buffer = buffer;
        this.type = 0;
        this.cookie = 0;
        this.link = null;
        this.future = null;
        this.onDone = null;
        this.admitted = false;
        this.freed = false;
        this.delivered = false;
        this.returned = false;
        this.sendEnded = false;
        this.abandoned = false;
        view(length);
    }

    /** A by-reference send failed with its peer: when its buffer may be reused ({@link SendPump#releaseLent}). */
    long lentUntil;
    /** By reference: delivered (the future settled, the window is back); the buffer waits for the release. */
    boolean delivered;
    /** By reference: the peer released the message. */
    boolean returned;
    /** By reference: the provider is done with the frame (its send completed, failed or was dropped). */
    boolean sendEnded;
    /** By reference: settled by a teardown; nothing more is done with it but freeing its buffer. */
    boolean abandoned;

    MemorySegment payload() {
        return payload;
    }

    void truncate(int newLength) {
        if (newLength < 0 || newLength > length) {
            throw new IllegalArgumentException("truncate to " + newLength + " of " + length);
        }
        view(newLength);
    }

    private void view(int newLength) {
        if (payloadOf != buffer || payload.byteSize() != newLength) {
            payload = buffer.segment().asSlice(FrameDescriptor.PAYLOAD_OFFSET, newLength);
            payloadOf = buffer;
        }
        length = newLength;
    }

    /** Frees the buffer once the transport is done with it; twice does nothing. */
    void free() {
        if (!freed) {
            freed = true;
            buffer.release();
        }
    }

    /**
     * The transport is done with the frame, which it does not touch again: the buffer is freed
     * (if not yet) and the future, if any, settles with {@code failure} or success. An eager
     * frame goes back to the pool first, so that the buffer's next allocation finds it, and so
     * does a message by reference whose send ended and whose release came; a rendezvous frame
     * does not, as the completion of its request may still come after the peer's release and
     * name it, nor does a message by reference that a teardown abandoned.
     */
    void finish(TransportException failure) {
        CompletableFuture<Void> settle = future;
        BiConsumer<? super Void, ? super Throwable> report = onDone;
        FabricTransport transport = peer.transport;
        // Settled once, whatever the kind: a second finish finds nothing to settle or count.
        future = null;
        onDone = null;
        RegisteredBuffer freeing = freed ? null : buffer;
        freed = true;
        if (type == FrameDescriptor.EAGER || (type == FrameDescriptor.RNDV_SHARED && sendEnded && returned && !abandoned)) {
            link = null;
            transport.frames().give(this);
        }
        if (freeing != null) {
            freeing.release();
        }
        settle(transport, settle, report, failure);
    }

    /**
     * Settles the future and the outcome handler, if any, with {@code failure} now, and leaves
     * the buffer and the frame to {@link #finish}: a send of a torn-down link whose buffer the
     * provider may still read ({@link OperationTable#ORPHANED_SEND}).
     */
    void settleEarly(TransportException failure) {
        CompletableFuture<Void> settle = future;
        BiConsumer<? super Void, ? super Throwable> report = onDone;
        future = null;
        onDone = null;
        settle(peer.transport, settle, report, failure);
    }

    private static void settle(FabricTransport transport, CompletableFuture<Void> settle,
            BiConsumer<? super Void, ? super Throwable> report, TransportException failure) {
        if (settle != null) {
            transport.window().awaitedSendDone();
            if (failure == null) {
                settle.complete(null);
            } else {
                settle.completeExceptionally(failure);
            }
        }
        if (report != null) {
            try {
                report.accept(null, failure);
            } catch (Throwable e) {
                // As a future's stage would: the handler's failure stays the handler's, never the
                // progress thread's or the sender's (but the VM's own errors go on).
                if (e instanceof VirtualMachineError vmError) {
                    throw vmError;
                }
                LOG.log(System.Logger.Level.WARNING, "a send's outcome handler failed", e);
            }
        }
    }

    boolean eager(int eagerThreshold) {
        return length <= eagerThreshold;
    }
}
