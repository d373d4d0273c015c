package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;
import dev.ferry.transport.UnauthenticatedException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Authentication belongs to the connection: a raw peer that never proved the secret gets
 * nothing, whatever address it claims, and costs the server a socket for the handshake
 * deadline at most.
 */
@Timeout(60)
class NettyAuthenticationTest {

    private static final SharedSecret SECRET = SharedSecret.of("the cluster's own secret, 32 bytes");
    private static final SharedSecret WRONG = SharedSecret.of("somebody else's secret, 32 bytes!");

    private final List<Transport> opened = new ArrayList<>();
    private final List<String> delivered = new CopyOnWriteArrayList<>();
    private final List<String> closedPeers = new CopyOnWriteArrayList<>();

    private Transport open(SharedSecret secret, MessageHandler handler) {
        Transport t = Transports.open(TransportConfig.defaults("netty").withSecret(secret)
                .withHandshakeTimeoutMillis(2_000), handler);
        opened.add(t);
        return t;
    }

    private Transport server() {
        return open(SECRET, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                byte[] bytes = message.segment().toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
                delivered.add(from.address() + " " + new String(bytes, StandardCharsets.UTF_8));
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                closedPeers.add(peer.address());
            }
        });
    }

    @AfterEach
    void close() {
        for (Transport t : opened) {
            t.close();
        }
    }

    private static void send(Peer peer, String text) throws Exception {
        byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
        var message = peer.allocate(bytes.length);
        java.lang.foreign.MemorySegment.copy(bytes, 0, message.segment(), java.lang.foreign.ValueLayout.JAVA_BYTE, 0,
                bytes.length);
        peer.send(1, message).get(10, TimeUnit.SECONDS);
    }

    /**
     * The bypass: a HELLO naming an authenticated client's listen address (anyone can read it
     * with {@code ss}), then DATA. Before the fix the server filed the raw connection under the
     * client's peer and delivered its DATA as the client's; and the raw connection's close
     * failed the client's peer too.
     */
    @Test
    void aHelloNamingAnAuthenticatedPeerGetsNothing() throws Exception {
        Transport server = server();
        Transport client = open(SECRET, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        send(peer, "from the client");
        assertTrue(waitFor(() -> delivered.size() == 1, 10_000));
        String victim = client.localAddress();
        String[] hostPort = server.localAddress().split(":");

        // The old HELLO (the address alone), then DATA; and the new HELLO, then DATA at once or
        // after a PROOF of nothing, claiming and not claiming a secret.
        for (int attempt = 0; attempt < 4; attempt++) {
            try (Socket raw = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
                raw.setSoTimeout(10_000);
                DataOutputStream out = new DataOutputStream(raw.getOutputStream());
                try {
                    switch (attempt) {
                        case 0 -> RawPeer.frame(out, FrameDescriptor.TYPE_HELLO, 0, victim.getBytes(StandardCharsets.UTF_8));
                        case 1 -> RawPeer.hello(out, victim, true);
                        case 2 -> {
                            RawPeer.hello(out, victim, true);
                            RawPeer.frame(out, FrameDescriptor.TYPE_PROOF, 0, new byte[32]);
                        }
                        default -> RawPeer.hello(out, victim, false);
                    }
                    RawPeer.frame(out, FrameDescriptor.TYPE_DATA, 1, "spoofed".getBytes(StandardCharsets.UTF_8));
                } catch (java.net.SocketException e) {
                    // Broken pipe or reset: the server refused and closed before all of it was
                    // written. What it answered, if anything, is still checked below.
                }
                assertNothingButRefusalThenClose(raw);
            }
        }
        send(peer, "from the client again");
        assertTrue(waitFor(() -> delivered.size() == 2, 10_000));
        assertEquals(List.of(victim + " from the client", victim + " from the client again"), delivered);
        assertTrue(peer.isOpen(), "the spoofer's close failed the real client's peer");
        assertEquals(List.of(), closedPeers);
        assertTrue(server.counters().authenticationFailures() >= 2, server.counters().toString());
    }

    /** Silent, trickling and oversized-claim connections are all closed; a client gets in meanwhile. */
    @Test
    void unauthenticatedConnectionsAreClosedAtTheDeadline() throws Exception {
        Transport server = server();
        String[] hostPort = server.localAddress().split(":");
        List<Socket> sockets = new ArrayList<>();
        try {
            Socket silent = new Socket(hostPort[0], Integer.parseInt(hostPort[1]));
            Socket trickle = new Socket(hostPort[0], Integer.parseInt(hostPort[1]));
            Socket huge = new Socket(hostPort[0], Integer.parseInt(hostPort[1]));
            sockets.addAll(List.of(silent, trickle, huge));
            for (Socket s : sockets) {
                s.setSoTimeout(15_000);
            }
            // A DATA frame that claims the largest message before any handshake: refused at its
            // header, not buffered.
            RawPeer.header(new DataOutputStream(huge.getOutputStream()), TransportConfig.defaults("netty").maxMessageSize(),
                    FrameDescriptor.TYPE_DATA, 0);
            Thread trickler = Thread.ofVirtual().start(() -> {
                try {
                    var out = trickle.getOutputStream();
                    byte[] hello = new byte[FrameDescriptor.HEADER_LENGTH];
                    for (int i = 0; i < 40 && !Thread.currentThread().isInterrupted(); i++) {
                        out.write(hello[i % hello.length]);
                        out.flush();
                        Thread.sleep(100);
                    }
                } catch (IOException | InterruptedException e) {
                    // closed by the server: what we want
                }
            });
            Transport client = open(SECRET, (from, m) -> m.release());
            send(client.connect(server.localAddress()), "meanwhile");
            assertNothingButRefusalThenClose(huge);
            assertNothingButRefusalThenClose(silent);
            assertNothingButRefusalThenClose(trickle);
            trickler.interrupt();
            assertTrue(waitFor(() -> delivered.size() == 1, 10_000));
        } finally {
            for (Socket s : sockets) {
                s.close();
            }
        }
    }

    @Test
    void wrongOrMissingSecretsAreRefusedWithTheReason() throws Exception {
        Transport server = server();
        Transport wrong = open(WRONG, (from, m) -> m.release());
        UnauthenticatedException e = assertThrows(UnauthenticatedException.class, () -> wrong.connect(server.localAddress()));
        assertTrue(e.getMessage().contains("does not hold the shared secret"), e.getMessage());
        Transport none = open(null, (from, m) -> m.release());
        e = assertThrows(UnauthenticatedException.class, () -> none.connect(server.localAddress()));
        assertTrue(e.getMessage().contains("requires the shared secret"), e.getMessage());
        Transport unprotected = open(null, (from, m) -> m.release());
        Transport withSecret = open(SECRET, (from, m) -> m.release());
        e = assertThrows(UnauthenticatedException.class, () -> withSecret.connect(unprotected.localAddress()));
        assertTrue(e.getMessage().contains("no shared secret"), e.getMessage());
        assertTrue(waitFor(() -> server.counters().linksOpen() == 0, 10_000), "a refused connection stayed open: "
                + server.counters());
        assertEquals(List.of(), delivered);
    }

    /** Reads until the server closes: at most a CHALLENGE (a refusal or a nonce), never anything else. */
    static void assertNothingButRefusalThenClose(Socket socket) throws IOException {
        DataInputStream in = new DataInputStream(socket.getInputStream());
        try {
            while (true) {
                byte[][] frame = RawPeer.read(in);
                assertEquals(FrameDescriptor.TYPE_CHALLENGE, frame[0][0], "the server answered with a frame of type "
                        + frame[0][0]);
            }
        } catch (EOFException | SocketException e) {
            // closed (or reset): the end we want
        }
    }

    static boolean waitFor(BooleanSupplier condition, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }
}
