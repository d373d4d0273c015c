package dev.ferry.transport.fabric;

import java.util.concurrent.atomic.AtomicReferenceArray;

import dev.ferry.memory.RegisteredBuffer;

/**
 * Message frames the transport is done with, for any of its peers. Each waits at the index of
 * the buffer it last served, so that a frame tends to meet its buffer again and keep its payload
 * view. Bounded: a frame that finds its index taken is left to the garbage collector, and a
 * buffer whose index is empty gets a new frame. Any thread.
 */
final class FramePool {

    /** A power of two, well above a send window's worth of small messages in flight. */
    private static final int FRAMES = 8192;

    private final AtomicReferenceArray<OutboundFrame> idle = new AtomicReferenceArray<>(FRAMES);

    /** A frame for {@code peer}'s message of {@code length} bytes in {@code buffer}. */
    OutboundFrame take(FabricPeer peer, RegisteredBuffer buffer, int length) {
        int i = index(buffer);
        OutboundFrame frame = idle.get(i);
        if (frame == null || !idle.compareAndSet(i, frame, null)) {
            frame = new OutboundFrame();
        }
        frame.reset(peer, buffer, length);
        return frame;
    }

    /** Takes back a frame nothing refers to any more. */
    void give(OutboundFrame frame) {
        idle.compareAndSet(index(frame.buffer), null, frame);
    }

    private static int index(RegisteredBuffer buffer) {
        return System.identityHashCode(buffer) & (FRAMES - 1);
    }
}
