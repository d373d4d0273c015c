package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import dev.ferry.transport.InboundMessage;

/**
 * The application's handle on one delivery of an {@link InboundFrame}. Releasing lets go of the
 * frame, atomically, so a kept handle throws {@link IllegalStateException} instead of showing the
 * next message that arrives in the same buffer.
 */
final class ReceivedMessage implements InboundMessage {

    private static final VarHandle FRAME;

    static {
        try {
            FRAME = MethodHandles.lookup().findVarHandle(ReceivedMessage.class, "frame", InboundFrame.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final int stream;
    private volatile InboundFrame frame;

    ReceivedMessage(InboundFrame frame) {
        this.stream = frame.stream;
        this.frame = frame;
    }

    @Override
    public int stream() {
        return stream;
    }

    @Override
    public MemorySegment segment() {
        InboundFrame f = frame;
        if (f == null) {
            throw new IllegalStateException("message on stream " + stream + " already released");
        }
        return f.view;
    }

    /** The frame behind this message until it is released, else null; for tests. */
    InboundFrame frame() {
        return frame;
    }

    @Override
    public void release() {
        InboundFrame f = (InboundFrame) FRAME.getAndSet(this, (InboundFrame) null);
        if (f == null) {
            throw new IllegalStateException("message on stream " + stream + " released twice");
        }
        f.link.peer.transport.receives.released(f);
    }
}
