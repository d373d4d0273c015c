package dev.ferry.transport.netty;

import io.netty.buffer.ByteBuf;

/**
 * The layout of a frame on a Netty link. All fields are big-endian (network order).
 *
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                  payload length (int32, &gt;= 0)                 |
 *  +---------------+---------------+-------------------------------+
 *  |     type      |    version    |         reserved (0)          |
 *  +---------------+---------------+-------------------------------+
 *  |            stream id (DATA) or link index (HELLO)             |
 *  +---------------------------------------------------------------+
 *  |                    payload (length bytes) ...                 |
 *  +---------------------------------------------------------------+
 * </pre>
 *
 * <p>Every link opens with a handshake of three frames, in which both sides prove they hold
 * the shared secret (the same HMAC challenge as the fabric transport's control channel, see
 * {@link dev.ferry.transport.SharedSecret}) before the acceptor files the connection under any
 * peer: authentication belongs to the connection, never to the address it claims.
 * <pre>
 *  HELLO     (1) connector: u8 has-secret | 16 B connector nonce | listen address (UTF-8 host:port)
 *                stream field: the index of the link among the peer's links
 *  CHALLENGE (3) acceptor:  u8 0 | 16 B acceptor nonce | proof (32 B, none without a secret)
 *                      or:  u8 1 | reason (UTF-8), and the acceptor closes
 *  PROOF     (4) connector: proof (32 B, none without a secret)
 *  WELCOME   (5) acceptor:  nothing; the link is up
 * </pre>
 * Only after a good PROOF does the acceptor file the link under the peer at the claimed listen
 * address (so that {@code connect(thatAddress)} returns the same peer and further links go back
 * to it), and say WELCOME; only after the WELCOME does the connector send anything else, so
 * that nothing it sends is lost to an acceptor that dropped the connection meanwhile (its
 * handshake deadline, say). Handshake frames
 * are at most {@link #MAX_HELLO_LENGTH} bytes, and a DATA frame before the handshake is done is
 * garbage whatever its length, so an unauthenticated connection holds a kilobyte at most.
 * {@link #TYPE_DATA} carries one application message. Any other type, another version, a
 * non-zero reserved field or a length beyond the limit is garbage: the link closes.
 *
 * <p>The sender reserves {@link #HEADER_LENGTH} bytes in front of every message buffer and
 * writes the header there, so header and payload leave in one buffer without a copy.
 */
public final class FrameDescriptor {

    /** Bytes of the header before the payload. */
    public static final int HEADER_LENGTH = 12;

    /** Offset of the payload length. */
    public static final int LENGTH_OFFSET = 0;

    /** Offset of the frame type. */
    public static final int TYPE_OFFSET = 4;

    /** Offset of the format version. */
    public static final int VERSION_OFFSET = 5;

    /** Offset of the reserved field, zero for now. */
    public static final int RESERVED_OFFSET = 6;

    /** Offset of the stream id (or, in a HELLO, the link index). */
    public static final int STREAM_OFFSET = 8;

    /** The format version this code writes and accepts. */
    public static final byte VERSION = 1;

    /** The connector introduces itself: whether it has a secret, its nonce, its listen address. */
    public static final byte TYPE_HELLO = 1;

    /** One application message. */
    public static final byte TYPE_DATA = 2;

    /** The acceptor's answer to a HELLO: its nonce and proof, or a refusal. */
    public static final byte TYPE_CHALLENGE = 3;

    /** The connector's proof, answering the CHALLENGE. */
    public static final byte TYPE_PROOF = 4;

    /** The acceptor took the PROOF: the link is up. */
    public static final byte TYPE_WELCOME = 5;

    /** A CHALLENGE that goes on. */
    public static final byte CHALLENGE_OK = 0;

    /** A CHALLENGE that refuses, with a reason. */
    public static final byte CHALLENGE_REFUSED = 1;

    /** A handshake frame (a nonce, a proof and a listen address at most); anything longer is garbage. */
    public static final int MAX_HELLO_LENGTH = 1024;

    private FrameDescriptor() {
    }

    /** Writes a header at {@code index} of {@code buffer} without moving its indices. */
    public static void writeHeader(ByteBuf buffer, int index, byte type, int stream, int payloadLength) {
        buffer.setInt(index + LENGTH_OFFSET, payloadLength);
        buffer.setByte(index + TYPE_OFFSET, type);
        buffer.setByte(index + VERSION_OFFSET, VERSION);
        buffer.setShort(index + RESERVED_OFFSET, 0);
        buffer.setInt(index + STREAM_OFFSET, stream);
    }

    /** The payload length of the header at {@code index}. */
    public static int payloadLength(ByteBuf buffer, int index) {
        return buffer.getInt(index + LENGTH_OFFSET);
    }

    /** The type of the header at {@code index}. */
    public static byte type(ByteBuf buffer, int index) {
        return buffer.getByte(index + TYPE_OFFSET);
    }

    /** The version of the header at {@code index}. */
    public static byte version(ByteBuf buffer, int index) {
        return buffer.getByte(index + VERSION_OFFSET);
    }

    /** The reserved field of the header at {@code index}. */
    public static short reserved(ByteBuf buffer, int index) {
        return buffer.getShort(index + RESERVED_OFFSET);
    }

    /** The stream id (or link index) of the header at {@code index}. */
    public static int stream(ByteBuf buffer, int index) {
        return buffer.getInt(index + STREAM_OFFSET);
    }
}
