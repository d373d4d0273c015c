package dev.ferry.transport.netty;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.admission.HandshakeGate;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.CorruptedFrameException;
import java.io.EOFException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import dev.ferry.transport.TransportException.Reason;

/**
 * The last handler of a link's pipeline: runs the handshake (see {@link FrameDescriptor}),
 * binds the channel to its {@link NettyLink} once both sides proved the secret (at the
 * WELCOME for a link we open, at the PROOF for one we accept), passes DATA frames to it, and
 * turns any error or close into the failure of the peer.
 *
 * <p>An accepted connection is admitted through the transport's {@link HandshakeGate}: it has
 * {@code handshakeTimeoutMillis} for the whole handshake, and every connection dropped before
 * it authenticated is logged, rate limited, with its reason. Until then nothing it sends reaches
 * a peer, a link or the application.
 *
 * <p>Confined to the channel's event loop.
 */
final class LinkHandler extends ChannelInboundHandlerAdapter {

    private static final System.Logger LOG = System.getLogger(LinkHandler.class.getName());
    private static final SecureRandom NONCES = new SecureRandom();
    private static final int HELLO_FIXED = 1 + SharedSecret.NONCE_BYTES;

    private final NettyTransport transport;
    private final FrameDecoder decoder;
    private final boolean outbound;
    /** The link we open (known from the start); for one we accept, set once it authenticated. */
    private NettyLink link;
    private Throwable failure;

    // The handshake.
    private final byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
    private byte[] theirNonce;
    private String claimedAddress;
    private int claimedIndex;
    private boolean authenticated;
    /** The connector sent its PROOF and waits for the WELCOME. */
    private boolean proved;
    /** An accepted connection's admission, until it authenticated; null for one we open. */
    private HandshakeGate.Ticket ticket;

    /** For a link we open ({@code link} known) or accept ({@code link} null until its PROOF). */
    LinkHandler(NettyTransport transport, FrameDecoder decoder, NettyLink link) {
        this.transport = transport;
        this.decoder = decoder;
        this.link = link;
        this.outbound = link != null;
        NONCES.nextBytes(nonce);
    }

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        Channel ch = ctx.channel();
        transport.onChannelActive(ch);
        if (outbound) {
            sendHello(ch);
        } else {
            InetSocketAddress remote = (InetSocketAddress) ch.remoteAddress();
            // The deadline fires on this channel's loop, after the reads of its turn.
            ticket = transport.gate().admit(remote.getAddress(), String.valueOf(remote), ch::close, ch.eventLoop());
        }
        ctx.fireChannelActive();
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        Frame frame = (Frame) msg;
        byte type = frame.type();
        if (type == FrameDescriptor.TYPE_DATA) {
            // The decoder lets DATA through only once the handshake is done.
            link.onData(frame);
            return;
        }
        ByteBuf payload = frame.payload();
        byte[] bytes = new byte[payload.readableBytes()];
        payload.readBytes(bytes);
        payload.release();
        if (authenticated) {
            throw new CorruptedFrameException("handshake frame of type " + type + " on an established link");
        }
        if (outbound && type == FrameDescriptor.TYPE_CHALLENGE && !proved) {
            onChallenge(ctx.channel(), bytes);
        } else if (outbound && type == FrameDescriptor.TYPE_WELCOME && proved) {
            authenticated = true;
            decoder.authenticated();
            link.attach(ctx.channel(), decoder);
        } else if (!outbound && type == FrameDescriptor.TYPE_HELLO && theirNonce == null) {
            onHello(ctx.channel(), bytes, frame.stream());
        } else if (!outbound && type == FrameDescriptor.TYPE_PROOF && theirNonce != null) {
            onProof(ctx.channel(), bytes);
        } else {
            throw new CorruptedFrameException("unexpected frame of type " + type + " in the handshake");
        }
    }

    // The connector's side.

    private void sendHello(Channel ch) {
        byte[] address = transport.localAddress().getBytes(StandardCharsets.UTF_8);
        byte[] body = new byte[HELLO_FIXED + address.length];
        body[0] = (byte) (transport.config().secret() != null ? 1 : 0);
        System.arraycopy(nonce, 0, body, 1, nonce.length);
        System.arraycopy(address, 0, body, HELLO_FIXED, address.length);
        write(ch, FrameDescriptor.TYPE_HELLO, link.index, body);
    }

    private void onChallenge(Channel ch, byte[] body) {
        String address = link.peer.address();
        if (body.length < 1) {
            throw new CorruptedFrameException("empty CHALLENGE");
        }
        if (body[0] != FrameDescriptor.CHALLENGE_OK) {
            String reason = new String(body, 1, body.length - 1, StandardCharsets.UTF_8);
            refusedBy(ch, new UnauthenticatedException(address + " refused the connection: " + reason));
            return;
        }
        if (body.length < HELLO_FIXED) {
            throw new CorruptedFrameException("CHALLENGE of " + body.length + " bytes");
        }
        byte[] acceptorNonce = java.util.Arrays.copyOfRange(body, 1, HELLO_FIXED);
        byte[] proof = java.util.Arrays.copyOfRange(body, HELLO_FIXED, body.length);
        SharedSecret secret = transport.config().secret();
        byte[] answer = new byte[0];
        if (secret != null) {
            if (!secret.verify(proof, "ferry-server", nonce, acceptorNonce, 0)) {
                refusedBy(ch, new UnauthenticatedException(address
                        + " failed authentication: it does not hold the shared secret"));
                return;
            }
            answer = secret.proof("ferry-client", acceptorNonce, nonce, 0);
        } else if (proof.length != 0) {
            refusedBy(ch, new UnauthenticatedException(address + " has a shared secret and this side none"));
            return;
        }
        write(ch, FrameDescriptor.TYPE_PROOF, 0, answer);
        proved = true;
    }

    /** The acceptor refused us, or could not prove the secret: the peer fails with that reason. */
    private void refusedBy(Channel ch, UnauthenticatedException why) {
        failure = why;
        transport.authenticationFailures.increment();
        link.peer.fail(why, link.peer.isEstablished());
        ch.close();
    }

    // The acceptor's side.

    private void onHello(Channel ch, byte[] body, int index) {
        if (body.length <= HELLO_FIXED) {
            throw new CorruptedFrameException("HELLO of " + body.length + " bytes names no address");
        }
        boolean theyHaveOne = body[0] != 0;
        theirNonce = java.util.Arrays.copyOfRange(body, 1, HELLO_FIXED);
        claimedAddress = new String(body, HELLO_FIXED, body.length - HELLO_FIXED, StandardCharsets.UTF_8);
        claimedIndex = index;
        SharedSecret secret = transport.config().secret();
        if (theyHaveOne != (secret != null)) {
            refuse(ch, secret != null ? "this side requires the shared secret" : "this side has no shared secret");
            return;
        }
        byte[] proof = secret == null ? new byte[0] : secret.proof("ferry-server", theirNonce, nonce, 0);
        byte[] answer = new byte[HELLO_FIXED + proof.length];
        answer[0] = FrameDescriptor.CHALLENGE_OK;
        System.arraycopy(nonce, 0, answer, 1, nonce.length);
        System.arraycopy(proof, 0, answer, HELLO_FIXED, proof.length);
        write(ch, FrameDescriptor.TYPE_CHALLENGE, 0, answer);
    }

    private void onProof(Channel ch, byte[] proof) {
        SharedSecret secret = transport.config().secret();
        boolean ok = secret == null ? proof.length == 0 : secret.verify(proof, "ferry-client", nonce, theirNonce, 0);
        if (!ok) {
            transport.authenticationFailures.increment();
            ticket.drop("refused", "authentication failed: no proof of the shared secret (claimed to be "
                    + claimedAddress + ")");
            return;
        }
        if (!ticket.authenticated()) {
            return; // its deadline passed meanwhile: closed already
        }
        authenticated = true;
        decoder.authenticated();
        link = transport.accept(claimedAddress, claimedIndex, ch, decoder);
        // Before anything the link sends: its drain runs after this handler, on this loop.
        write(ch, FrameDescriptor.TYPE_WELCOME, 0, new byte[0]);
    }

    /** Tells the connector why, then closes; counted and logged (rate limited). */
    private void refuse(Channel ch, String reason) {
        if (transport.config().secret() != null) {
            transport.authenticationFailures.increment();
        }
        byte[] text = reason.getBytes(StandardCharsets.UTF_8);
        byte[] body = new byte[1 + text.length];
        body[0] = FrameDescriptor.CHALLENGE_REFUSED;
        System.arraycopy(text, 0, body, 1, text.length);
        ByteBuf frame = frame(ch, FrameDescriptor.TYPE_CHALLENGE, 0, body);
        transport.gate().dropLog().drop("refused", ch.remoteAddress() + ": " + reason);
        ticket.finished();
        ch.writeAndFlush(frame).addListener(ChannelFutureListener.CLOSE);
    }

    private static void write(Channel ch, byte type, int stream, byte[] body) {
        ch.writeAndFlush(frame(ch, type, stream, body), ch.voidPromise());
    }

    private static ByteBuf frame(Channel ch, byte type, int stream, byte[] body) {
        ByteBuf buffer = ch.alloc().directBuffer(FrameDescriptor.HEADER_LENGTH + body.length);
        FrameDescriptor.writeHeader(buffer, 0, type, stream, body.length);
        buffer.writerIndex(FrameDescriptor.HEADER_LENGTH).writeBytes(body);
        return buffer;
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (failure == null) {
            failure = cause;
            transport.linkFailures.increment();
            if (ticket != null && !authenticated) {
                ticket.failed(cause);
            } else {
                LOG.log(cause instanceof CorruptedFrameException ? System.Logger.Level.WARNING : System.Logger.Level.DEBUG,
                        "closing link " + ctx.channel() + " to "
                        + (link != null ? link.peer.address() : "an unidentified peer") + ": " + cause, cause);
            }
        }
        ctx.close();
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        transport.onChannelInactive(ctx.channel());
        if (ticket != null && !authenticated) {
            ticket.failed(new EOFException());
        }
        if (link != null) {
            TransportException why = failure instanceof TransportException t ? t
                    : failure != null
                    ? new TransportException(Reason.PEER_FAILED, "link " + ctx.channel() + " to " + link.peer.address()
                            + " failed: " + failure.getMessage(), failure)
                    : new TransportException(Reason.PEER_FAILED, "link " + ctx.channel() + " to " + link.peer.address()
                            + " closed" + (authenticated ? "" : " during the handshake"));
            link.peer.fail(why, true);
        }
        ctx.fireChannelInactive();
    }
}
