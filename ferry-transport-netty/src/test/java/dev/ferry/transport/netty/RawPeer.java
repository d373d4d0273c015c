package dev.ferry.transport.netty;

import dev.ferry.transport.SharedSecret;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.Arrays;

/** A hand-made Netty peer on a raw socket: frames byte by byte, the handshake, for hostile tests. */
final class RawPeer {

    private RawPeer() {
    }

    /** Writes a frame header. */
    static void header(DataOutputStream out, int length, byte type, int stream) throws IOException {
        out.writeInt(length);
        out.writeByte(type);
        out.writeByte(FrameDescriptor.VERSION);
        out.writeShort(0);
        out.writeInt(stream);
    }

    /** Writes a whole frame. */
    static void frame(DataOutputStream out, byte type, int stream, byte[] payload) throws IOException {
        header(out, payload.length, type, stream);
        out.write(payload);
        out.flush();
    }

    /** A HELLO naming {@code address}, claiming a secret if {@code claimSecret}; returns the nonce. */
    static byte[] hello(DataOutputStream out, String address, boolean claimSecret) throws IOException {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        new SecureRandom().nextBytes(nonce);
        byte[] name = address.getBytes(StandardCharsets.UTF_8);
        byte[] body = new byte[1 + nonce.length + name.length];
        body[0] = (byte) (claimSecret ? 1 : 0);
        System.arraycopy(nonce, 0, body, 1, nonce.length);
        System.arraycopy(name, 0, body, 1 + nonce.length, name.length);
        frame(out, FrameDescriptor.TYPE_HELLO, 0, body);
        return nonce;
    }

    /** Reads one frame: {type, payload...} as {@code byte[][]}. */
    static byte[][] read(DataInputStream in) throws IOException {
        int length = in.readInt();
        byte type = in.readByte();
        in.readByte();
        in.readShort();
        in.readInt();
        if (length < 0 || length > FrameDescriptor.MAX_HELLO_LENGTH) {
            throw new IOException("frame of " + length + " bytes");
        }
        byte[] payload = new byte[length];
        in.readFully(payload);
        return new byte[][] {{type}, payload};
    }

    /** The connector's side of the handshake on {@code socket}, with {@code secret} (null: none), to the WELCOME. */
    static void handshake(Socket socket, String address, SharedSecret secret) throws IOException {
        DataOutputStream out = new DataOutputStream(socket.getOutputStream());
        DataInputStream in = new DataInputStream(socket.getInputStream());
        byte[] nonce = hello(out, address, secret != null);
        byte[][] challenge = read(in);
        if (challenge[0][0] != FrameDescriptor.TYPE_CHALLENGE || challenge[1][0] != FrameDescriptor.CHALLENGE_OK) {
            throw new IOException("refused: " + new String(challenge[1], StandardCharsets.UTF_8));
        }
        byte[] theirs = Arrays.copyOfRange(challenge[1], 1, 1 + SharedSecret.NONCE_BYTES);
        byte[] proof = secret == null ? new byte[0] : secret.proof("ferry-client", theirs, nonce, 0);
        frame(out, FrameDescriptor.TYPE_PROOF, 0, proof);
        byte[][] welcome = read(in);
        if (welcome[0][0] != FrameDescriptor.TYPE_WELCOME) {
            throw new IOException("no WELCOME but a frame of type " + welcome[0][0]);
        }
    }
}
