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
 * <p>{@link #TYPE_HELLO} is the first frame the connecting side sends on every link: its
 * payload is the connector's own listen address (UTF-8, as {@code host:port}), so the acceptor
 * files the link under the same peer that {@code connect(thatAddress)} would return, and can
 * open further links back to it. Its stream field carries the index of the link among the
 * peer's links. {@link #TYPE_DATA} carries one application message. Any other type, another
 * version, a non-zero reserved field or a length beyond the limit is garbage: the link closes.
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

    /** The connector introduces itself: payload is its listen address. */
    public static final byte TYPE_HELLO = 1;

    /** One application message. */
    public static final byte TYPE_DATA = 2;

    /** A listen address is a host and a port; anything longer is garbage. */
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
