package dev.ferry.transport.netty;

import dev.ferry.transport.InboundMessage;
import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A received message: a read-only segment over the payload slice of the read buffer. Holding it
 * holds the link's receive capacity; {@link #release()} gives the slice back to the pool and
 * may let the link read again.
 */
final class NettyInboundMessage implements InboundMessage {

    private final NettyLink link;
    private final int stream;
    private final ByteBuf payload;
    private final int length;
    private final MemorySegment segment;
    private final AtomicBoolean released = new AtomicBoolean();

    NettyInboundMessage(NettyLink link, int stream, ByteBuf payload) {
        this.link = link;
        this.stream = stream;
        this.payload = payload;
        this.length = payload.readableBytes();
        this.segment = Segments.of(payload, payload.readerIndex(), length).asReadOnly();
    }

    @Override
    public int stream() {
        return stream;
    }

    @Override
    public MemorySegment segment() {
        if (released.get()) {
            throw new IllegalStateException("message already released");
        }
        return segment;
    }

    @Override
    public void release() {
        if (!released.compareAndSet(false, true)) {
            throw new IllegalStateException("message already released");
        }
        payload.release();
        link.onReleased(length);
    }

    int length() {
        return length;
    }
}
