package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;

/**
 * The TCP control connection to one peer, once the handshake is done. It carries what must not
 * depend on the data path: heartbeats, and the opening of further links to the peer.
 *
 * <p>Messages, each a type byte and then big-endian fields:
 *
 * <pre>
 *  HEARTBEAT    (1)
 *  OPEN_LINK    (2)  int route | int requester's link id | int requester's token | int credits granted to the other side
 *  LINK_OPENED  (3)  int requester's link id | int answerer's link id | int answerer's token | int credits granted to the requester
 *  LINK_REFUSED (4)  int requester's link id | UTF reason
 * </pre>
 *
 * Either side may open a link; the requester connects its endpoint once the answer names the
 * answerer's link id. Writes are serialized here; one reader thread per peer reads.
 */
final class ControlChannel {

    static final byte HEARTBEAT = 1;
    static final byte OPEN_LINK = 2;
    static final byte LINK_OPENED = 3;
    static final byte LINK_REFUSED = 4;

    final Socket socket;
    private final DataOutputStream out;
    private final DataInputStream in;
    private volatile long lastWriteNanos = System.nanoTime();

    ControlChannel(Socket socket) throws IOException {
        this.socket = socket;
        this.out = new DataOutputStream(new java.io.BufferedOutputStream(socket.getOutputStream(), 256));
        this.in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream(), 256));
    }

    DataInputStream in() {
        return in;
    }

    long lastWriteNanos() {
        return lastWriteNanos;
    }

    synchronized void heartbeat() throws IOException {
        out.writeByte(HEARTBEAT);
        flush();
    }

    synchronized void openLink(int route, int linkId, int token, int grant) throws IOException {
        out.writeByte(OPEN_LINK);
        out.writeInt(route);
        out.writeInt(linkId);
        out.writeInt(token);
        out.writeInt(grant);
        flush();
    }

    synchronized void linkOpened(int requesterId, int linkId, int token, int grant) throws IOException {
        out.writeByte(LINK_OPENED);
        out.writeInt(requesterId);
        out.writeInt(linkId);
        out.writeInt(token);
        out.writeInt(grant);
        flush();
    }

    synchronized void linkRefused(int requesterId, String reason) throws IOException {
        out.writeByte(LINK_REFUSED);
        out.writeInt(requesterId);
        out.writeUTF(reason);
        flush();
    }

    private void flush() throws IOException {
        out.flush();
        lastWriteNanos = System.nanoTime();
    }

    void close() {
        try {
            socket.close();
        } catch (IOException e) {
            // closing anyway
        }
    }
}
