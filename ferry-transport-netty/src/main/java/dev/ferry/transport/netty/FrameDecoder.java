package dev.ferry.transport.netty;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.CorruptedFrameException;
import java.util.ArrayDeque;

/**
 * Cuts the byte stream of a link into {@link Frame}s without copying where it can, and stops
 * cutting when told to, which is how the receive side pushes back.
 *
 * <p>A frame that lies whole inside one read buffer goes up as a retained slice of it: no copy.
 * A frame that spans reads is assembled into a buffer of exactly its length, one copy, because
 * the application is promised one contiguous segment; this beats {@code ByteToMessageDecoder},
 * which would grow (and copy) a cumulation buffer for a large frame several times.
 *
 * <p>{@link #suspend} stops decoding right after the current frame: the rest of the read buffer
 * waits here and auto-read goes off, so the kernel's receive buffer fills and TCP's window
 * slows the sender. {@link #resume} decodes what waited and turns auto-read back on. Since
 * auto-read off ends Netty's read loop after the current buffer, at most one read buffer waits.
 *
 * <p>Garbage (unknown type or version, non-zero reserved field, a length beyond the limit, a DATA
 * frame before {@link #authenticated}) and a connection that ends inside a frame are reported as
 * {@link CorruptedFrameException} through {@code exceptionCaught}; after that the decoder drops
 * everything. Until the handshake is done only handshake frames of a kilobyte at most pass, so an
 * unauthenticated peer cannot make the decoder allocate the frame it claims.
 *
 * <p>Confined to the channel's event loop.
 */
final class FrameDecoder extends ChannelInboundHandlerAdapter {

    private final int maxPayloadLength;
    private final ArrayDeque<ByteBuf> waiting = new ArrayDeque<>();
    private final ByteBuf header = Unpooled.wrappedBuffer(new byte[FrameDescriptor.HEADER_LENGTH]).clear();
    private ChannelHandlerContext context;
    private boolean inFrame;
    private byte frameType;
    private int frameStream;
    private int frameLength;
    private ByteBuf assembling;
    private boolean suspended;
    private boolean failed;
    private boolean authenticated;

    /**
     * A decoder that refuses DATA payloads longer than {@code maxPayloadLength}, and any DATA
     * frame until {@link #authenticated} unless {@code authenticated} already.
     */
    FrameDecoder(int maxPayloadLength, boolean authenticated) {
        this.maxPayloadLength = maxPayloadLength;
        this.authenticated = authenticated;
    }

    /** A decoder of a link that needs no handshake: DATA payloads up to {@code maxPayloadLength}. */
    FrameDecoder(int maxPayloadLength) {
        this(maxPayloadLength, true);
    }

    /** The handshake is done: DATA frames pass from now on. */
    void authenticated() {
        authenticated = true;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        context = ctx;
    }

    /** Stops passing frames up after the current one, and stops reading the socket. */
    void suspend() {
        suspended = true;
        context.channel().config().setAutoRead(false);
    }

    /** Whether {@link #suspend} is in force. */
    boolean isSuspended() {
        return suspended;
    }

    /** Decodes what waited while suspended, then reads the socket again (unless suspended anew). */
    void resume() {
        if (!suspended) {
            return;
        }
        suspended = false;
        decodeWaiting();
        if (!suspended && context.channel().isActive()) {
            context.channel().config().setAutoRead(true);
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf in = (ByteBuf) msg;
        if (failed) {
            in.release();
            return;
        }
        waiting.add(in);
        if (!suspended) {
            decodeWaiting();
        }
    }

    private void decodeWaiting() {
        try {
            ByteBuf in;
            while (!suspended && !failed && (in = waiting.peek()) != null) {
                decode(in);
                if (!in.isReadable()) {
                    waiting.poll().release();
                }
            }
        } catch (CorruptedFrameException e) {
            fail(e);
        }
    }

    private void decode(ByteBuf in) {
        while (!suspended && !failed) {
            if (!inFrame) {
                if (header.isReadable() || in.readableBytes() < FrameDescriptor.HEADER_LENGTH) {
                    int take = Math.min(header.writableBytes(), in.readableBytes());
                    header.writeBytes(in, take);
                    if (header.isWritable()) {
                        return;
                    }
                    startFrame(header, 0);
                    header.clear();
                } else {
                    startFrame(in, in.readerIndex());
                    in.skipBytes(FrameDescriptor.HEADER_LENGTH);
                }
            }
            if (assembling == null) {
                if (in.readableBytes() >= frameLength) {
                    emit(in.readRetainedSlice(frameLength));
                    continue;
                }
                if (!in.isReadable()) {
                    return;
                }
                assembling = context.alloc().directBuffer(frameLength, frameLength);
            }
            assembling.writeBytes(in, Math.min(assembling.writableBytes(), in.readableBytes()));
            if (assembling.isWritable()) {
                return;
            }
            ByteBuf whole = assembling;
            assembling = null;
            emit(whole);
        }
    }

    private void startFrame(ByteBuf buffer, int index) {
        byte type = FrameDescriptor.type(buffer, index);
        byte version = FrameDescriptor.version(buffer, index);
        int length = FrameDescriptor.payloadLength(buffer, index);
        if (version != FrameDescriptor.VERSION) {
            throw new CorruptedFrameException("frame version " + version + ", expected " + FrameDescriptor.VERSION);
        }
        if (FrameDescriptor.reserved(buffer, index) != 0) {
            throw new CorruptedFrameException("non-zero reserved field in frame header");
        }
        int limit = switch (type) {
            case FrameDescriptor.TYPE_DATA -> {
                if (!authenticated) {
                    throw new CorruptedFrameException("DATA frame of " + length + " bytes before the handshake");
                }
                yield maxPayloadLength;
            }
            case FrameDescriptor.TYPE_HELLO, FrameDescriptor.TYPE_CHALLENGE, FrameDescriptor.TYPE_PROOF,
                    FrameDescriptor.TYPE_WELCOME ->
                    FrameDescriptor.MAX_HELLO_LENGTH;
            default -> throw new CorruptedFrameException("unknown frame type " + type);
        };
        if (length < 0 || length > limit) {
            throw new CorruptedFrameException("frame of type " + type + " with length " + length
                    + " beyond the limit of " + limit);
        }
        frameType = type;
        frameStream = FrameDescriptor.stream(buffer, index);
        frameLength = length;
        inFrame = true;
    }

    private void emit(ByteBuf payload) {
        inFrame = false;
        context.fireChannelRead(new Frame(frameType, frameStream, payload));
    }

    private void fail(CorruptedFrameException cause) {
        failed = true;
        releaseAll();
        context.fireExceptionCaught(cause);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        boolean truncated = !failed && (inFrame || header.isReadable());
        releaseAll();
        if (truncated) {
            failed = true;
            ctx.fireExceptionCaught(new CorruptedFrameException(header.isReadable()
                    ? "connection closed inside a frame header (" + header.readableBytes() + " of "
                            + FrameDescriptor.HEADER_LENGTH + " bytes)"
                    : "connection closed inside a frame of " + frameLength + " bytes"));
        }
        ctx.fireChannelInactive();
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        releaseAll();
    }

    private void releaseAll() {
        ByteBuf buffer;
        while ((buffer = waiting.poll()) != null) {
            buffer.release();
        }
        if (assembling != null) {
            assembling.release();
            assembling = null;
        }
    }
}
