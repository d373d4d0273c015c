package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.IOException;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;

/**
 * Parses what a peer sends on a control connection during the handshake, before it is known to
 * be a peer. Every read is bounded by the format itself (a byte string or a UTF string is at most
 * 65,535 bytes, a link count at most the routes of this side), so a hostile dialer can make this
 * side allocate no more than that, and a short stream ends in an {@link java.io.EOFException}.
 *
 * <p>The exchange, each field big-endian ({@code bytes} is a u16 length and that many bytes):
 *
 * <pre>
 *  dialer                                              acceptor
 *  MAGIC i32 | has secret u8 | nonce[16]          --&gt;
 *                                                 &lt;--  MAGIC i32 | 0 | nonce[16] | proof bytes
 *                                                      (or MAGIC i32 | 1 | reason UTF: refused)
 *  proof bytes                                    --&gt;
 *  listen address UTF | fabric address bytes |
 *  links i32 | links x (link id i32, grant i32) |
 *  eager threshold i32 | doorbell path UTF        --&gt;
 *                                                 &lt;--  MAGIC i32 | 0 | fabric address bytes |
 *                                                      links i32 | links x (link id i32, grant i32) |
 *                                                      eager threshold i32 | doorbell path UTF
 * </pre>
 *
 * Stateless; any thread.
 */
final class HandshakeReader {

    /** The first word of both directions: "FRY3". */
    static final int MAGIC = 0x46525933;

    private HandshakeReader() {
    }

    /** A dialer's opening: whether it holds a secret, and its nonce. */
    record Challenge(boolean secret, byte[] nonce) {
    }

    /** A dialer's hello after it passed the challenge. */
    record Hello(String address, byte[] fabricAddress, int[] linkIds, int[] grants) {

        int links() {
            return linkIds.length;
        }
    }

    /** Either side's abilities at the end of its hello or answer. */
    record Abilities(int eagerThreshold, String doorbellPath) {
    }

    /**
     * The dialer's first message.
     *
     * @throws IOException if it is not a Ferry transport or the stream ends early
     */
    static Challenge readChallenge(DataInputStream in) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new IOException("not a Ferry transport");
        }
        boolean secret = in.readBoolean();
        return new Challenge(secret, readNonce(in));
    }

    /** A nonce of {@link SharedSecret#NONCE_BYTES}; a short one ends in an {@link java.io.EOFException}. */
    static byte[] readNonce(DataInputStream in) throws IOException {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        in.readFully(nonce);
        return nonce;
    }

    /**
     * The dialer's hello: its listen address, fabric address and links.
     *
     * @param maxLinks the routes of this side; a dialer asking for more is refused
     * @throws IOException if the stream ends early, a string is malformed or the link count is bad
     */
    static Hello readHello(DataInputStream in, int maxLinks) throws IOException {
        String address = in.readUTF();
        byte[] fabricAddress = readBytes(in);
        int n = in.readInt();
        if (n <= 0 || n > maxLinks) {
            throw new IOException("bad link count " + n);
        }
        int[] ids = new int[n];
        int[] grants = new int[n];
        for (int i = 0; i < n; i++) {
            ids[i] = in.readInt();
            grants[i] = in.readInt();
        }
        return new Hello(address, fabricAddress, ids, grants);
    }

    /**
     * The abilities that end a hello or its answer.
     *
     * @throws IOException if the stream ends early, the threshold is negative or the path malformed
     */
    static Abilities readAbilities(DataInputStream in) throws IOException {
        int eager = in.readInt();
        if (eager < 0) {
            throw new IOException("bad eager threshold " + eager);
        }
        return new Abilities(eager, in.readUTF());
    }

    /**
     * The acceptor's status word: returns if it accepted, throws with its reason if it refused
     * ({@link UnauthenticatedException} at the {@code challenge}, else {@link TransportException}).
     *
     * @throws TransportException also if {@code address} is not a Ferry transport
     * @throws IOException if the stream ends early or the reason is malformed
     */
    static void readAnswer(String address, DataInputStream in, boolean challenge) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new TransportException(address + " is not a Ferry transport");
        }
        if (in.readByte() != 0) {
            String reason = address + " refused the connection: " + in.readUTF();
            throw challenge ? new UnauthenticatedException(reason) : new TransportException(reason);
        }
    }

    /** A u16-length byte string: at most 65,535 bytes. */
    static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readUnsignedShort()];
        in.readFully(bytes);
        return bytes;
    }
}
