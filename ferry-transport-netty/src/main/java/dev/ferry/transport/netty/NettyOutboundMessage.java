package dev.ferry.transport.netty;

import dev.ferry.transport.OutboundMessage;
import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A send buffer: a pooled direct {@link ByteBuf} with {@link FrameDescriptor#HEADER_LENGTH}
 * bytes reserved in front of the message. The application encodes into {@link #segment()},
 * which is the buffer's own memory; at send the header is written into the reserved bytes and
 * the one buffer goes to the socket as it is.
 */
final class NettyOutboundMessage implements OutboundMessage {

    private static final int OPEN = 0;
    private static final int SENT = 1;
    private static final int RELEASED = 2;

    private final NettyTransport transport;
    private final ByteBuf buffer;
    private final long poolBytes;
    private final AtomicInteger state = new AtomicInteger(OPEN);
    private int length;
    private MemorySegment segment;

    NettyOutboundMessage(NettyTransport transport, ByteBuf buffer, int length, long poolBytes) {
        this.transport = transport;
        this.buffer = buffer;
        this.length = length;
        this.poolBytes = poolBytes;
        buffer.writerIndex(FrameDescriptor.HEADER_LENGTH + length);
        this.segment = Segments.of(buffer, FrameDescriptor.HEADER_LENGTH, length);
    }

    @Override
    public MemorySegment segment() {
        checkOpen();
        return segment;
    }

    @Override
    public void truncate(int newLength) {
        checkOpen();
        if (newLength < 0 || newLength > length) {
            throw new IllegalArgumentException("cannot truncate a message of " + length + " bytes to " + newLength);
        }
        length = newLength;
        buffer.writerIndex(FrameDescriptor.HEADER_LENGTH + newLength);
        segment = segment.asSlice(0, newLength);
    }

    @Override
    public void release() {
        if (!state.compareAndSet(OPEN, RELEASED)) {
            throw new IllegalStateException("message already " + (state.get() == SENT ? "sent" : "released"));
        }
        discard();
    }

    private void checkOpen() {
        if (state.get() != OPEN) {
            throw new IllegalStateException("message already " + (state.get() == SENT ? "sent" : "released"));
        }
    }

    NettyTransport transport() {
        return transport;
    }

    int length() {
        return length;
    }

    boolean isOpen() {
        return state.get() == OPEN;
    }

    /** Marks the message as handed to the transport; a second send or a send after release fails. */
    void claim() {
        if (!state.compareAndSet(OPEN, SENT)) {
            throw new IllegalStateException("message already " + (state.get() == SENT ? "sent" : "released"));
        }
    }

    /** Undoes {@link #claim} when a {@code trySend} did not take the message. */
    void unclaim() {
        state.set(OPEN);
    }

    /** The buffer with its header written, for the channel; the channel releases it. */
    ByteBuf frame(int stream) {
        FrameDescriptor.writeHeader(buffer, 0, FrameDescriptor.TYPE_DATA, stream, length);
        return buffer;
    }

    /** Frees the buffer and its share of the send pool (a message that will not be written). */
    void discard() {
        buffer.release();
        transport.releaseSendPool(poolBytes);
    }

    /** Gives the send pool back after the channel wrote (and released) the buffer. */
    void written() {
        transport.releaseSendPool(poolBytes);
    }
}
