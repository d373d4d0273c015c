package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;

import dev.ferry.memory.RegisteredBuffer;

/**
 * A received message: a view of the receive buffer (eager), of the rendezvous buffer it was
 * pulled into, or of the sender's own buffer in its shared slab (by reference, {@link PeerMemory}).
 * Releasing an eager message reposts its buffer, which returns a credit; releasing one by
 * reference gives the sender its buffer back.
 *
 * <p>An eager frame belongs to its receive buffer and serves each message the buffer brings;
 * the application sees it only through a {@link ReceivedMessage}, one per delivery.
 */
final class InboundFrame {

    Link link;
    int stream;
    final RegisteredBuffer buffer;
    /** The frame of a receive buffer: an eager message, or one by reference (then {@link #shared} is set). */
    final boolean eager;
    long length;
    MemorySegment view;
    /** Rendezvous: the sender's buffer and token, and the pull's progress. */
    long remoteAddress;
    long remoteKey;
    long cookie;
    long requested;
    long pulled;
    /** Rendezvous: when it was announced, for the flight recorder (0 while its event is off). */
    long announcedNanos;
    RegisteredBuffer target;
    /** By reference: the peer's slab the view lies in, until the message is released (RNDV_DONE). */
    PeerMemory.Slab shared;
    boolean complete;
    /** The view is not of {@link #buffer} (a message by reference came in it last). */
    private boolean viewElsewhere;

    InboundFrame(Link link, int stream, RegisteredBuffer buffer, boolean eager, long length, MemorySegment view) {
        this.link = link;
        this.stream = stream;
        this.buffer = buffer;
        this.eager = eager;
        this.length = length;
        this.view = view;
        this.complete = eager;
    }

    /** The frame of receive buffer {@code buffer}, before its first message. */
    InboundFrame(RegisteredBuffer buffer) {
        this(null, 0, buffer, true, -1, null);
    }

    /** Takes the eager message that just arrived in {@link #buffer}; its view is kept while the length repeats. */
    InboundFrame eager(Link from, int messageStream, long messageLength) {
        link = from;
        stream = messageStream;
        if (messageLength != length || viewElsewhere) {
            view = buffer.segment().asSlice(FrameDescriptor.HEADER, messageLength);
            length = messageLength;
            viewElsewhere = false;
        }
        return this;
    }

    /**
     * Takes the message by reference whose frame just arrived in {@link #buffer}: a view of the
     * sender's slab, held with the buffer (its credit) until released.
     */
    InboundFrame byReference(Link from, int messageStream, MemorySegment slabView, long messageCookie,
            PeerMemory.Slab slab) {
        link = from;
        stream = messageStream;
        view = slabView;
        length = slabView.byteSize();
        viewElsewhere = true;
        cookie = messageCookie;
        shared = slab;
        return this;
    }
}
