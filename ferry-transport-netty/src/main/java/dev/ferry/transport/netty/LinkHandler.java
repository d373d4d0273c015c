package dev.ferry.transport.netty;

import dev.ferry.transport.TransportException;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.CorruptedFrameException;
import java.nio.charset.StandardCharsets;
import dev.ferry.transport.TransportException.Reason;

/**
 * The last handler of a link's pipeline: binds the channel to its {@link NettyLink} (at once
 * for a link we open, at the HELLO for one we accept), passes DATA frames to it, and turns any
 * error or close into the failure of the peer.
 */
final class LinkHandler extends ChannelInboundHandlerAdapter {

    private static final System.Logger LOG = System.getLogger(LinkHandler.class.getName());

    private final NettyTransport transport;
    private final FrameDecoder decoder;
    private final boolean outbound;
    private NettyLink link;
    private Throwable failure;

    /** For a link we open ({@code link} known) or accept ({@code link} null until HELLO). */
    LinkHandler(NettyTransport transport, FrameDecoder decoder, NettyLink link) {
        this.transport = transport;
        this.decoder = decoder;
        this.link = link;
        this.outbound = link != null;
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        transport.onChannelActive(ctx.channel());
        if (outbound) {
            link.attach(ctx.channel(), decoder, true);
        }
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        Frame frame = (Frame) msg;
        if (frame.type() == FrameDescriptor.TYPE_DATA) {
            if (link == null) {
                frame.payload().release();
                throw new CorruptedFrameException("DATA frame before HELLO");
            }
            link.onData(frame);
            return;
        }
        String address = frame.payload().toString(StandardCharsets.UTF_8);
        frame.payload().release();
        if (link != null) {
            throw new CorruptedFrameException("unexpected HELLO from " + address + " on an established link");
        }
        link = transport.accept(address, frame.stream(), ctx.channel(), decoder);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (failure == null) {
            failure = cause;
            transport.linkFailures.increment();
            LOG.log(cause instanceof CorruptedFrameException ? System.Logger.Level.WARNING : System.Logger.Level.DEBUG,
                    "closing link " + ctx.channel() + " to "
                    + (link != null ? link.peer.address() : "an unidentified peer") + ": " + cause, cause);
        }
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        transport.onChannelInactive(ctx.channel());
        if (link != null) {
            TransportException why = failure != null
                    ? new TransportException(Reason.PEER_FAILED, "link " + ctx.channel() + " to " + link.peer.address() + " failed: "
                            + failure.getMessage(), failure)
                    : new TransportException(Reason.PEER_FAILED, "link " + ctx.channel() + " to " + link.peer.address() + " closed");
            link.peer.fail(why, true);
        }
        ctx.fireChannelInactive();
    }
}
