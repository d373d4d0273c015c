package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * The frame layout of the fabric transport. Every frame starts with a 32-byte header; a
 * rendezvous request adds the sender's buffer address and key.
 *
 * <pre>
 *  0      1      2             4            8            12           16                        24                        32
 *  +------+------+-------------+------------+------------+------------+-------------------------+-------------------------+
 *  | type | ver  | credits u16 | token      | link id    | stream     | length (i64)            | cookie (i64)            |
 *  +------+------+-------------+------------+------------+------------+-------------------------+-------------------------+
 *  RNDV_REQ only:                                          32 remote address (i64)   40 remote key (i64)     (48 bytes)
 *  RNDV_SHARED only:                                       32 offset in slab (i64)   40 slab index (i32) | fd (i32)
 * </pre>
 *
 * <ul>
 *   <li>{@code credits}: receive credits the sender of the frame returns (piggybacked);</li>
 *   <li>{@code token}: the receiver's secret of the link (32 random bits, told only to the
 *       link's peer over the authenticated control channel). A frame whose token is not its
 *       link's is dropped and counted, never delivered and never held against the link: on a
 *       shared endpoint (shm's is named {@code fi_shm://<pid>:0:0}) any process of the host can
 *       send a frame naming a live link's id, but not its token;</li>
 *   <li>{@code link id}: the receiver's (random) id of the link, which names the sender where
 *       links share a receive queue (reliable-datagram endpoints, shared receive contexts);</li>
 *   <li>{@code length}: payload bytes that follow (EAGER) or the size to pull (RNDV_REQ);</li>
 *   <li>{@code cookie}: the sender's token for a rendezvous, echoed in RNDV_DONE; the number
 *       of credits asked for in RECLAIM or given back in YIELD; in EAGER, the release of a
 *       message by reference riding along (0: none; {@link PendingReleases}).</li>
 * </ul>
 *
 * A send buffer reserves {@link #PAYLOAD_OFFSET} bytes before the payload, so that either frame
 * is built in place: EAGER from offset 16 (header then payload), RNDV_REQ from offset 0.
 */
final class FrameDescriptor {

    static final byte EAGER = 1;
    static final byte RNDV_REQ = 2;
    static final byte RNDV_DONE = 3;
    static final byte CREDIT = 4;
    /** The receiver asks for {@code cookie} of the credits it granted back (the link is idle). */
    static final byte RECLAIM = 5;
    /** The sender gives {@code cookie} credits back, after a {@link #RECLAIM}. */
    static final byte YIELD = 6;
    /**
     * A message by reference: its payload lies in the sender's shared slab (slab index and the
     * sender's descriptor of it, offset), which the receiver maps ({@link PeerMemory}) and
     * delivers in place; released with RNDV_DONE like a rendezvous.
     */
    static final byte RNDV_SHARED = 7;
    /**
     * Releases of messages by reference that no eager frame carried ({@link PendingReleases}):
     * {@code length} cookies of 8 bytes follow the header, at most {@link PendingReleases#CAPACITY}.
     */
    static final byte RELEASES = 8;
    static final byte VERSION = 1;

    static final int HEADER = 32;
    static final int RNDV_REQ_BYTES = 48;
    static final int PAYLOAD_OFFSET = 48;
    static final int EAGER_OFFSET = PAYLOAD_OFFSET - HEADER;
    static final int MAX_CREDITS = 0xffff;

    static final int TYPE = 0;
    static final int VER = 1;
    static final int CREDITS = 2;
    static final int TOKEN = 4;
    static final int LINK = 8;
    static final int STREAM = 12;
    static final int LENGTH = 16;
    static final int COOKIE = 24;
    static final int REMOTE_ADDRESS = 32;
    static final int REMOTE_KEY = 40;

    private static final ValueLayout.OfShort U16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private FrameDescriptor() {
    }

    static void header(MemorySegment frame, byte type, int credits, int link, int token, int stream, long length,
            long cookie) {
        header(frame, 0, type, credits, link, token, stream, length, cookie);
    }

    /** Writes a header at offset {@code at} of {@code frame}: no slice, so nothing is allocated per frame. */
    static void header(MemorySegment frame, long at, byte type, int credits, int link, int token, int stream, long length,
            long cookie) {
        frame.set(ValueLayout.JAVA_BYTE, at + TYPE, type);
        frame.set(ValueLayout.JAVA_BYTE, at + VER, VERSION);
        frame.set(U16, at + CREDITS, (short) credits);
        frame.set(I32, at + TOKEN, token);
        frame.set(I32, at + LINK, link);
        frame.set(I32, at + STREAM, stream);
        frame.set(I64, at + LENGTH, length);
        frame.set(I64, at + COOKIE, cookie);
    }

    static void rendezvous(MemorySegment frame, long address, long key) {
        frame.set(I64, REMOTE_ADDRESS, address);
        frame.set(I64, REMOTE_KEY, key);
    }

    /** A RNDV_SHARED frame's payload: {@code offset} into slab {@code slabIndex}, the sender's descriptor {@code fd}. */
    static void shared(MemorySegment frame, long offset, int slabIndex, int fd) {
        frame.set(I64, REMOTE_ADDRESS, offset);
        frame.set(I64, REMOTE_KEY, (long) slabIndex << 32 | (fd & 0xffff_ffffL));
    }

    static int sharedSlab(MemorySegment frame) {
        return (int) (remoteKey(frame) >>> 32);
    }

    static int sharedFd(MemorySegment frame) {
        return (int) remoteKey(frame);
    }

    /** Cookie {@code i} of a RELEASES frame. */
    static long released(MemorySegment frame, int i) {
        return frame.get(I64, HEADER + 8L * i);
    }

    /** Writes cookie {@code i} of a RELEASES frame. */
    static void released(MemorySegment frame, int i, long cookie) {
        frame.set(I64, HEADER + 8L * i, cookie);
    }

    static byte type(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, TYPE);
    }

    static byte version(MemorySegment frame) {
        return frame.get(ValueLayout.JAVA_BYTE, VER);
    }

    static int credits(MemorySegment frame) {
        return Short.toUnsignedInt(frame.get(U16, CREDITS));
    }

    static int token(MemorySegment frame) {
        return frame.get(I32, TOKEN);
    }

    static int link(MemorySegment frame) {
        return frame.get(I32, LINK);
    }

    static int stream(MemorySegment frame) {
        return frame.get(I32, STREAM);
    }

    static long length(MemorySegment frame) {
        return frame.get(I64, LENGTH);
    }

    static long cookie(MemorySegment frame) {
        return frame.get(I64, COOKIE);
    }

    static long remoteAddress(MemorySegment frame) {
        return frame.get(I64, REMOTE_ADDRESS);
    }

    static long remoteKey(MemorySegment frame) {
        return frame.get(I64, REMOTE_KEY);
    }

    /** Why {@code frame} of {@code received} bytes is malformed, or null if it is well formed. */
    static String validate(MemorySegment frame, long received, int eagerThreshold, long maxMessage) {
        if (received < HEADER) {
            return "truncated header: " + received + " bytes";
        }
        if (version(frame) != VERSION) {
            return "unknown frame version " + version(frame);
        }
        long length = length(frame);
        return switch (type(frame)) {
            case EAGER -> length < 0 || length > eagerThreshold || received != HEADER + length
                    ? "eager length " + length + " in a frame of " + received + " bytes (limit " + eagerThreshold + ")"
                    : null;
            case RNDV_REQ, RNDV_SHARED -> received != RNDV_REQ_BYTES || length <= 0 || length > maxMessage
                    ? "rendezvous of " + length + " bytes in a frame of " + received + " (limit " + maxMessage + ")"
                    : null;
            case RNDV_DONE, CREDIT -> received != HEADER ? "control frame of " + received + " bytes" : null;
            case RELEASES -> length < 1 || length > PendingReleases.CAPACITY || received != HEADER + 8 * length
                    ? length + " releases in a frame of " + received + " bytes" : null;
            case RECLAIM, YIELD -> received != HEADER ? "control frame of " + received + " bytes"
                    : cookie(frame) < 0 || cookie(frame) > MAX_CREDITS ? "credit count " + cookie(frame) : null;
            default -> "unknown frame type " + type(frame);
        };
    }
}
