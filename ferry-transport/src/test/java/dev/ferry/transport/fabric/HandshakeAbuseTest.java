package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Silent, trickling and connect-and-drop connections at the control channel cost a socket for
 * the handshake deadline and no handshake slot: a good client gets in at once meanwhile, and
 * every dropped connection is logged with what happened.
 */
@Timeout(120)
class HandshakeAbuseTest extends FabricTransportFixture {

    private static final SharedSecret SECRET = SharedSecret.of("the cluster's own secret, 32 bytes");
    /** Well above the 16 handshake slots: before the gate, these locked every client out for 10 s. */
    private static final int SILENT = 40;
    private static final int TRICKLING = 8;
    private static final int DROPPED = 20;

    private static TransportConfig config(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 16L << 20).withSecret(SECRET);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void slowAndSilentConnectionsDoNotLockAClientOut(String provider) throws Exception {
        List<String> warnings = new CopyOnWriteArrayList<>();
        Logger logger = Logger.getLogger("dev.ferry.transport.fabric");
        Handler capture = new Handler() {
            @Override
            public void publish(LogRecord record) {
                warnings.add(String.valueOf(record.getMessage()));
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        logger.addHandler(capture);
        List<Socket> abusers = new ArrayList<>();
        List<Thread> tricklers = new ArrayList<>();
        try {
            CountDownLatch arrived = new CountDownLatch(1);
            Transport server = open(config(provider), (from, m) -> {
                m.release();
                arrived.countDown();
            });
            String[] hostPort = server.localAddress().split(":");
            String host = hostPort[0];
            int port = Integer.parseInt(hostPort[1]);
            for (int i = 0; i < SILENT; i++) {
                abusers.add(new Socket(host, port));
            }
            for (int i = 0; i < TRICKLING; i++) {
                Socket s = new Socket(host, port);
                abusers.add(s);
                tricklers.add(Thread.ofVirtual().start(() -> {
                    try {
                        for (int b = 0; b < 200; b++) {
                            s.getOutputStream().write(0x46); // 'F', as in the magic, forever
                            s.getOutputStream().flush();
                            Thread.sleep(100);
                        }
                    } catch (IOException | InterruptedException e) {
                        // closed by the server
                    }
                }));
            }
            // Shorter than the 10 s that each abuser held a slot for before: this fails there.
            Transport client = open(config(provider).withConnectTimeoutMillis(5_000), (from, m) -> m.release());
            Peer peer = client.connect(server.localAddress());
            peer.send(0, peer.allocate(100)).get(10, TimeUnit.SECONDS);
            assertTrue(arrived.await(10, TimeUnit.SECONDS));
            for (Socket s : abusers) {
                s.setSoTimeout(15_000);
                assertClosedByServer(s);
            }
            assertTrue(waitFor(() -> warnings.stream().anyMatch(w -> w.contains("no handshake within 2000 ms")), 10_000),
                    () -> "no deadline in the log: " + warnings);
            for (int i = 0; i < DROPPED; i++) {
                new Socket(host, port).close();
            }
            peer.send(0, peer.allocate(100)).get(10, TimeUnit.SECONDS);
            assertTrue(warnings.stream().noneMatch(w -> w.endsWith(": null") || w.contains("null)")),
                    () -> "a dropped connection without a reason: " + warnings);
            assertTrue(waitFor(() -> ((FabricTransport) server).handshakesPending() == 0, 10_000),
                    "connections that dropped stayed pending");
            assertEquals(1, server.counters().linksOpen());
        } finally {
            logger.removeHandler(capture);
            for (Thread t : tricklers) {
                t.interrupt();
            }
            for (Socket s : abusers) {
                s.close();
            }
        }
    }

    static void assertClosedByServer(Socket socket) throws IOException {
        InputStream in = socket.getInputStream();
        try {
            // The control channel answers nothing before a full hello: the next thing is the end.
            assertEquals(-1, in.read(), "the server answered an unauthenticated connection");
        } catch (SocketException e) {
            // reset: closed too
        }
    }
}
