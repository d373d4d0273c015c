package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.TransportException;

/**
 * A message or control frame on its way out. Messages are built in place in a registered send
 * buffer: {@link FrameDescriptor#PAYLOAD_OFFSET} bytes of room for the frame, then the payload
 * the application encoded.
 */
final class OutboundFrame implements OutboundMessage {

    final FabricPeer peer;
    final RegisteredBuffer buffer;
    private MemorySegment payload;
    int length;
    /** Control frames: type; messages: EAGER or RNDV_REQ once sent. */
    byte type;
    int stream;
    long cookie;
    Link link;
    CompletableFuture<Void> future;
    /** The window was taken by trySend. */
    boolean admitted;
    private boolean handedOver;
    private boolean released;

    OutboundFrame(FabricPeer peer, RegisteredBuffer buffer, int length) {
        this.peer = peer;
        this.buffer = buffer;
        this.length = length;
        this.payload = buffer.segment().asSlice(FrameDescriptor.PAYLOAD_OFFSET, length);
    }

    /** A control frame (RNDV_DONE or CREDIT) in a small buffer. */
    static OutboundFrame control(FabricPeer peer, RegisteredBuffer buffer, byte type, long cookie) {
        OutboundFrame frame = new OutboundFrame(peer, buffer, 0);
        frame.type = type;
        frame.cookie = cookie;
        frame.handedOver = true;
        return frame;
    }

    @Override
    public synchronized MemorySegment segment() {
        if (handedOver || released) {
            throw new IllegalStateException("message already " + (released ? "released" : "sent"));
        }
        return payload;
    }

    @Override
    public synchronized void truncate(int newLength) {
        if (newLength < 0 || newLength > length) {
            throw new IllegalArgumentException("truncate to " + newLength + " of " + length);
        }
        length = newLength;
        payload = payload.asSlice(0, newLength);
    }

    @Override
    public synchronized void release() {
        if (handedOver) {
            throw new IllegalStateException("message was sent; the transport releases it");
        }
        if (released) {
            throw new IllegalStateException("message released twice");
        }
        released = true;
        buffer.release();
    }

    /** Takes ownership from the application. */
    synchronized void handOver(FabricPeer to) {
        if (to != peer) {
            throw new TransportException("message was allocated for " + peer.address() + ", sent to " + to.address());
        }
        if (handedOver || released) {
            throw new IllegalStateException("message already " + (released ? "released" : "sent"));
        }
        handedOver = true;
    }

    /** Frees the buffer once the transport is done with it. */
    void free() {
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        buffer.release();
    }

    boolean eager(int eagerThreshold) {
        return length <= eagerThreshold;
    }
}
