package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;

import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.InboundMessage;

/**
 * A received message: a view of the receive buffer (eager) or of the rendezvous buffer it was
 * pulled into. Releasing an eager message reposts its buffer, which returns a credit.
 */
final class InboundFrame implements InboundMessage {

    final Link link;
    final int stream;
    final RegisteredBuffer buffer;
    final boolean eager;
    final long length;
    MemorySegment view;
    /** Rendezvous: the sender's buffer and token, and the pull's progress. */
    long remoteAddress;
    long remoteKey;
    long cookie;
    long requested;
    long pulled;
    RegisteredBuffer target;
    boolean complete;
    private volatile boolean released;

    InboundFrame(Link link, int stream, RegisteredBuffer buffer, boolean eager, long length, MemorySegment view) {
        this.link = link;
        this.stream = stream;
        this.buffer = buffer;
        this.eager = eager;
        this.length = length;
        this.view = view;
        this.complete = eager;
    }

    @Override
    public int stream() {
        return stream;
    }

    @Override
    public MemorySegment segment() {
        if (released) {
            throw new IllegalStateException("message on stream " + stream + " already released");
        }
        return view;
    }

    @Override
    public void release() {
        synchronized (this) {
            if (released) {
                throw new IllegalStateException("message on stream " + stream + " released twice");
            }
            released = true;
        }
        link.peer.transport.released(this);
    }
}
