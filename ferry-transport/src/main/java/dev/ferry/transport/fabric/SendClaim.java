package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The application's handle on a pooled {@link OutboundFrame}, one per allocation. Sending or
 * releasing swaps the frame out for a marker, atomically, so a kept handle throws
 * {@link IllegalStateException} instead of touching the frame's next message.
 */
final class SendClaim implements OutboundMessage {

    private static final VarHandle FRAME;
    private static final OutboundFrame SENT = new OutboundFrame();
    private static final OutboundFrame RELEASED = new OutboundFrame();

    static {
        try {
            FRAME = MethodHandles.lookup().findVarHandle(SendClaim.class, "frame", OutboundFrame.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private volatile OutboundFrame frame;

    SendClaim(OutboundFrame frame) {
        this.frame = frame;
    }

    @Override
    public MemorySegment segment() {
        return live().payload();
    }

    @Override
    public void truncate(int length) {
        live().truncate(length);
    }

    @Override
    public void release() {
        OutboundFrame f = take(RELEASED);
        f.free();
        f.peer.transport.frames().give(f);
    }

    /** The frame, while the application still owns it. */
    OutboundFrame live() {
        OutboundFrame f = frame;
        if (f == SENT || f == RELEASED) {
            throw gone(f);
        }
        return f;
    }

    /** Takes the frame from the application for sending to {@code to}. */
    OutboundFrame handOver(FabricPeer to) {
        OutboundFrame f = live();
        if (f.peer != to) {
            throw new TransportException(Reason.BAD_INPUT, "message was allocated for " + f.peer.address() + ", sent to " + to.address());
        }
        return take(SENT);
    }

    private OutboundFrame take(OutboundFrame marker) {
        for (;;) {
            OutboundFrame f = frame;
            if (marker == RELEASED && f == SENT) {
                throw new IllegalStateException("message was sent; the transport releases it");
            }
            if (marker == RELEASED && f == RELEASED) {
                throw new IllegalStateException("message released twice");
            }
            if (f == SENT || f == RELEASED) {
                throw gone(f);
            }
            if (FRAME.compareAndSet(this, f, marker)) {
                return f;
            }
        }
    }

    private static IllegalStateException gone(OutboundFrame marker) {
        return new IllegalStateException(marker == SENT ? "message already sent" : "message already released");
    }
}
