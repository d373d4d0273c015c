package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The handshake on a new control connection: the challenge that proves both sides hold the
 * shared secret, then the hello that exchanges fabric addresses, link ids and abilities. All
 * fields are big-endian ({@link DataOutputStream}); {@code bytes} is an unsigned 16-bit length
 * and then that many bytes; {@code UTF} is {@link DataOutputStream#writeUTF}.
 *
 * <pre>
 *  dialer                                              acceptor
 *    | MAGIC int | has secret bool | nonce (16)          |
 *    |---------------------------------------------------->|
 *    |  MAGIC int | status 0 | nonce (16) | proof bytes    |   (proof empty without a secret)
 *    |<----------------------------------------------------|   or MAGIC | status 1 | UTF reason
 *    | proof bytes                                         |
 *    |---------------------------------------------------->|   refused: MAGIC | 1 | UTF reason
 *    | hello: UTF listen address | fabric address bytes    |
 *    |        int n | n x (int link id | int token |       |
 *    |                     int grant)                      |
 *    |        int eager threshold | UTF doorbell path      |
 *    |        long pid | int probe fd | UTF shared prefix  |
 *    |---------------------------------------------------->|
 *    |  MAGIC int | status 0 | fabric address bytes        |
 *    |  int n | n x (int link id | int token | int grant)  |   or MAGIC | status 1 | UTF reason
 *    |  int eager threshold | UTF doorbell path            |   ("already connected")
 *    |  long pid | int probe fd | UTF shared prefix        |
 *    |  bool maps you                                      |
 *    |<----------------------------------------------------|
 *    | bool maps you                                       |
 *    |---------------------------------------------------->|
 *    |          control channel: see ControlChannel        |
 * </pre>
 *
 * A proof is {@link SharedSecret#proof} over both nonces, labelled {@code ferry-server} for the
 * acceptor's and {@code ferry-client} for the dialer's, so neither can be replayed as the other.
 * The dialer says nothing about its fabric before the acceptor has proved the secret; the
 * acceptor says nothing before the dialer has. An empty doorbell path means none. The shared
 * prefix names the sender's shared send slabs ("" for none) and the probe fd an empty file of that
 * prefix ({@link dev.ferry.memory.RegisteredAllocator#sharedProbeFd}); each side opens the other's
 * probe through {@code /proc/<pid>/fd} and says whether it could ("maps you"), and a side sends
 * messages by reference ({@link FrameDescriptor#RNDV_SHARED}) only to a peer that could. A link's token
 * is the secret its receiver wants in every frame (see {@link FrameDescriptor}); it travels only
 * here and in the control channel's link messages, after both proofs.
 */
final class HandshakeDescriptor {

    /** "FRY3": the first word of the dialer's greeting and of each of the acceptor's answers. */
    static final int MAGIC = 0x46525933;
    static final byte ACCEPTED = 0;
    static final byte REFUSED = 1;
    static final String SERVER_LABEL = "ferry-server";
    static final String CLIENT_LABEL = "ferry-client";

    private HandshakeDescriptor() {
    }

    /**
     * The hello (dialer, with {@code address}) or its answer (acceptor, {@code address} null):
     * the sender's fabric address, its links (its id and token of each and the credits it grants
     * on it), its eager threshold, its doorbell path ("" for none), and where its shared send
     * slabs are: its process id, its probe's descriptor and the slabs' name prefix ("" for none).
     * {@code mapsYou}: in an answer, whether the acceptor could open the dialer's probe.
     */
    record Hello(String address, byte[] fabricAddress, int[] linkIds, int[] tokens, int[] grants, int eagerThreshold,
            String doorbellPath, long pid, int probeFd, String sharedPrefix, boolean mapsYou) {

        int links() {
            return linkIds.length;
        }
    }

    /** The dialer's greeting: whether it holds a secret, and its nonce. */
    record Greeting(boolean hasSecret, byte[] nonce) {
    }

    static void writeGreeting(DataOutputStream out, boolean hasSecret, byte[] nonce) throws IOException {
        out.writeInt(MAGIC);
        out.writeBoolean(hasSecret);
        out.write(nonce);
        out.flush();
    }

    /** The acceptor's challenge answer: its nonce and its proof. */
    static void writeChallenge(DataOutputStream out, byte[] nonce, byte[] proof) throws IOException {
        out.writeInt(MAGIC);
        out.writeByte(ACCEPTED);
        out.write(nonce);
        writeBytes(out, proof);
        out.flush();
    }

    static void writeRefusal(DataOutputStream out, String reason) throws IOException {
        out.writeInt(MAGIC);
        out.writeByte(REFUSED);
        out.writeUTF(reason);
        out.flush();
    }

    /** The dialer's hello; {@link #writeAnswer} is the acceptor's. */
    static void writeHello(DataOutputStream out, Hello hello) throws IOException {
        out.writeUTF(hello.address());
        writeBody(out, hello);
    }

    static void writeAnswer(DataOutputStream out, Hello hello) throws IOException {
        out.writeInt(MAGIC);
        out.writeByte(ACCEPTED);
        writeBody(out, hello);
        out.writeBoolean(hello.mapsYou());
        out.flush();
    }

    private static void writeBody(DataOutputStream out, Hello hello) throws IOException {
        writeBytes(out, hello.fabricAddress());
        out.writeInt(hello.links());
        for (int i = 0; i < hello.links(); i++) {
            out.writeInt(hello.linkIds()[i]);
            out.writeInt(hello.tokens()[i]);
            out.writeInt(hello.grants()[i]);
        }
        out.writeInt(hello.eagerThreshold());
        out.writeUTF(hello.doorbellPath());
        out.writeLong(hello.pid());
        out.writeInt(hello.probeFd());
        out.writeUTF(hello.sharedPrefix());
        out.flush();
    }

    /**
     * Reads the dialer's greeting.
     *
     * @throws IOException if it is not a Ferry transport or the stream ends early
     */
    static Greeting readGreeting(DataInputStream in) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new IOException("not a Ferry transport");
        }
        boolean hasSecret = in.readBoolean();
        return new Greeting(hasSecret, readNonce(in));
    }

    /** A nonce of {@link SharedSecret#NONCE_BYTES}: a short one is an {@link java.io.EOFException}, never accepted. */
    static byte[] readNonce(DataInputStream in) throws IOException {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        in.readFully(nonce);
        return nonce;
    }

    /** Reads a dialer's hello; at most {@code maxLinks} links. */
    static Hello readHello(DataInputStream in, int maxLinks) throws IOException {
        String address = in.readUTF();
        return readBody(in, address, maxLinks);
    }

    /**
     * Reads the acceptor's answer to a hello of {@code links} links (the status first: see
     * {@link #readStatus}).
     */
    static Hello readAnswer(String from, DataInputStream in, int links) throws IOException {
        readStatus(from, in, false);
        // At most the links asked for: a count beyond them is refused before anything is allocated.
        Hello body = readBody(in, null, links);
        Hello answer = new Hello(null, body.fabricAddress(), body.linkIds(), body.tokens(), body.grants(),
                body.eagerThreshold(), body.doorbellPath(), body.pid(), body.probeFd(), body.sharedPrefix(), in.readBoolean());
        if (answer.links() != links) {
            throw new TransportException(Reason.UNREACHABLE, from + " answered with " + answer.links() + " links for " + links);
        }
        return answer;
    }

    private static Hello readBody(DataInputStream in, String address, int maxLinks) throws IOException {
        byte[] fabricAddress = readBytes(in);
        int n = in.readInt();
        if (n <= 0 || n > maxLinks) {
            throw new IOException("bad link count " + n);
        }
        int[] ids = new int[n];
        int[] tokens = new int[n];
        int[] grants = new int[n];
        for (int i = 0; i < n; i++) {
            ids[i] = in.readInt();
            tokens[i] = in.readInt();
            grants[i] = in.readInt();
        }
        int eager = in.readInt();
        if (eager < 0) {
            throw new IOException("bad eager threshold " + eager);
        }
        String doorbell = in.readUTF();
        long pid = in.readLong();
        int probeFd = in.readInt();
        return new Hello(address, fabricAddress, ids, tokens, grants, eager, doorbell, pid, probeFd, in.readUTF(), false);
    }

    /**
     * Reads the acceptor's status: throws with its reason if it refused, an
     * {@link UnauthenticatedException} if it refused at the challenge.
     */
    static void readStatus(String from, DataInputStream in, boolean challenge) throws IOException {
        if (in.readInt() != MAGIC) {
            throw new TransportException(Reason.UNREACHABLE, from + " is not a Ferry transport");
        }
        if (in.readByte() != ACCEPTED) {
            String reason = from + " refused the connection: " + in.readUTF();
            throw challenge ? new UnauthenticatedException(reason) : new TransportException(Reason.UNREACHABLE, reason);
        }
    }

    static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
        out.writeShort(bytes.length);
        out.write(bytes);
    }

    /** Bytes from a peer not yet authenticated: a claimed length above {@code max} is garbage. */
    static byte[] readBytes(DataInputStream in, int max) throws IOException {
        int length = in.readUnsignedShort();
        if (length > max) {
            throw new IOException("a field of " + length + " bytes where " + max + " at most belong");
        }
        byte[] bytes = new byte[length];
        in.readFully(bytes);
        return bytes;
    }

    static byte[] readBytes(DataInputStream in) throws IOException {
        byte[] bytes = new byte[in.readUnsignedShort()];
        in.readFully(bytes);
        return bytes;
    }
}
