package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The RPC frame: a fixed header in front of every message the RPC layer sends, then the body.
 * Every field is little-endian; the body of a request or response is the caller's bytes,
 * encoded in place in the transport's registered buffer.
 *
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------+---------------+-------------------------------+
 *  |     type      |     flags     |            version            |  0
 *  +---------------+---------------+-------------------------------+
 *  |                            method                             |  4
 *  +---------------------------------------------------------------+
 *  |                          client id                            |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                           call id                             | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |   deadline: microseconds left when sent (request), or status  | 24
 *  |   code (error)                                                |
 *  +---------------------------------------------------------------+
 *  |   acknowledged: every call id below it has completed (client  | 32
 *  |   to server), or the server's epoch (server to client)        |
 *  +---------------------------------------------------------------+
 *  |                          body ...                             | 40
 * </pre>
 *
 * <p>The deadline travels as time left rather than a wall-clock instant, so clocks of the two
 * hosts need not agree. The client id and call id together name a call across reconnects and
 * transports: the server keys its deduplication table on them. The epoch is a random number a
 * server draws when it starts; a client that sees it change knows the server lost its state.
 * Handshake frames ({@link #HELLO} to {@link #REFUSED}) carry the client's handshake number in
 * the call id field, so that a late answer to a handshake the client gave up on is ignored.
 */
public final class RpcDescriptor {

    /** Bytes in front of every body. */
    public static final int HEADER = 40;
    /** Current protocol version. */
    public static final short VERSION = 1;

    public static final int TYPE_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int VERSION_OFFSET = 2;
    public static final int METHOD_OFFSET = 4;
    public static final int CLIENT_ID_OFFSET = 8;
    public static final int CALL_ID_OFFSET = 16;
    public static final int DEADLINE_OFFSET = 24;
    public static final int STATUS_OFFSET = DEADLINE_OFFSET;
    public static final int ACK_OFFSET = 32;
    public static final int EPOCH_OFFSET = ACK_OFFSET;

    // Frame types.
    /** A call: method, ids, deadline, request body. */
    public static final byte REQUEST = 1;
    /** A successful result: the response body. */
    public static final byte RESPONSE = 2;
    /** A failed call: the status code, and a UTF-8 body "class\nmessage". */
    public static final byte ERROR = 3;
    /** Liveness probe from the client; carries the acknowledgement watermark. */
    public static final byte PING = 4;
    /** Answer to {@link #PING}; carries the server epoch. */
    public static final byte PONG = 5;
    /** Client opens a session: body = client nonce. */
    public static final byte HELLO = 6;
    /** Server answers: epoch; body = server nonce, then the server's proof (empty without a secret). */
    public static final byte CHALLENGE = 7;
    /** Client proves it knows the secret: body = its HMAC (empty without a secret). */
    public static final byte AUTH = 8;
    /** Server accepts the session; epoch. */
    public static final byte WELCOME = 9;
    /** Server refuses the session; body = the reason in UTF-8. */
    public static final byte REFUSED = 10;
    /** Client gave up on a call; best effort, the handler may still run. */
    public static final byte CANCEL = 11;

    // Flags.
    /** The method may run more than once for one call. */
    public static final byte FLAG_IDEMPOTENT = 1;
    /** This request was sent before, on an earlier session. */
    public static final byte FLAG_RETRY = 2;
    /** This response was replayed from the deduplication table. */
    public static final byte FLAG_REPLAYED = 4;

    // Status codes of ERROR frames.
    /** The handler threw; the body names the exception. */
    public static final int STATUS_REMOTE_EXCEPTION = 1;
    /** No handler for the method. */
    public static final int STATUS_UNKNOWN_METHOD = 2;
    /** The deadline passed before the handler started. */
    public static final int STATUS_DEADLINE_EXCEEDED = 3;
    /** The peer has not authenticated. */
    public static final int STATUS_NOT_AUTHENTICATED = 4;
    /**
     * A retried non-idempotent call whose outcome the server no longer holds (trimmed or evicted);
     * it is not run again.
     */
    public static final int STATUS_OUTCOME_LOST = 5;

    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private RpcDescriptor() {
    }

    /** Writes a whole header. */
    public static void write(MemorySegment frame, byte type, byte flags, int method, long clientId, long callId,
            long deadlineOrStatus, long ackOrEpoch) {
        frame.set(ValueLayout.JAVA_BYTE, TYPE_OFFSET, type);
        frame.set(ValueLayout.JAVA_BYTE, FLAGS_OFFSET, flags);
        frame.set(SHORT, VERSION_OFFSET, VERSION);
        frame.set(INT, METHOD_OFFSET, method);
        frame.set(LONG, CLIENT_ID_OFFSET, clientId);
        frame.set(LONG, CALL_ID_OFFSET, callId);
        frame.set(LONG, DEADLINE_OFFSET, deadlineOrStatus);
        frame.set(LONG, ACK_OFFSET, ackOrEpoch);
    }

    public static byte type(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, TYPE_OFFSET);
    }

    public static byte flags(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, FLAGS_OFFSET);
    }

    public static short version(MemorySegment frame) {
        return frame.get(SHORT, VERSION_OFFSET);
    }

    public static int method(MemorySegment frame) {
        return frame.get(INT, METHOD_OFFSET);
    }

    public static long clientId(MemorySegment frame) {
        return frame.get(LONG, CLIENT_ID_OFFSET);
    }

    public static long callId(MemorySegment frame) {
        return frame.get(LONG, CALL_ID_OFFSET);
    }

    /** Microseconds left of the call's deadline when the request was sent. */
    public static long deadlineMicros(MemorySegment frame) {
        return frame.get(LONG, DEADLINE_OFFSET);
    }

    public static int status(MemorySegment frame) {
        return (int) frame.get(LONG, STATUS_OFFSET);
    }

    public static long ack(MemorySegment frame) {
        return frame.get(LONG, ACK_OFFSET);
    }

    public static long epoch(MemorySegment frame) {
        return frame.get(LONG, EPOCH_OFFSET);
    }

    /** Sets the flags of a header already written. */
    public static void flags(MemorySegment frame, byte flags) {
        frame.set(ValueLayout.JAVA_BYTE, FLAGS_OFFSET, flags);
    }

    /** The body: everything after the header. */
    public static MemorySegment body(MemorySegment frame) {
        return frame.asSlice(HEADER);
    }

    /** True if {@code frame} is long enough for a header and speaks this version. */
    public static boolean valid(MemorySegment frame) {
        return frame.byteSize() >= HEADER && version(frame) == VERSION;
    }

    /** A name for a frame type, for logs and errors. */
    public static String typeName(byte type) {
        return switch (type) {
            case REQUEST -> "REQUEST";
            case RESPONSE -> "RESPONSE";
            case ERROR -> "ERROR";
            case PING -> "PING";
            case PONG -> "PONG";
            case HELLO -> "HELLO";
            case CHALLENGE -> "CHALLENGE";
            case AUTH -> "AUTH";
            case WELCOME -> "WELCOME";
            case REFUSED -> "REFUSED";
            case CANCEL -> "CANCEL";
            default -> "type " + type;
        };
    }
}
