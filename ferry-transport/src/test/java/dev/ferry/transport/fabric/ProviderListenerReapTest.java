package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataInputStream;
import java.io.IOException;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * The tcp provider's own listener (the port of its passive endpoint, which libfabric serves)
 * after a burst of connections that never complete libfabric's handshake: connect and drop,
 * garbage, and well-formed connection requests for links that do not exist. Every socket is
 * reaped (nothing left in CLOSE-WAIT, the process's descriptors back where they were), a request
 * for an unknown link is refused, and a good client connects afterwards.
 */
@Timeout(120)
class ProviderListenerReapTest extends FabricTransportFixture {

    /** {@code struct ofi_ctrl_hdr} of libfabric 1.17's tcp provider: 32 bytes. */
    private static final int CM_HEADER = 32;
    private static final byte TCPX_CTRL_HDR_VERSION = 3;
    private static final byte CONNREQ = 0;
    private static final byte NACK = 6;
    private static final String CLOSE_WAIT = "08";

    @Test
    void halfOpenConnectionsAreReaped() throws Exception {
        TransportConfig config = TransportConfig.defaults("tcp").withPools(16L << 20, 16L << 20, 16L << 20);
        CountDownLatch arrived = new CountDownLatch(1);
        Transport server = open(config, (from, m) -> {
            m.release();
            arrived.countDown();
        });
        byte[] sockaddr = ((FabricTransport) server).fabricAddress();
        int port = ((sockaddr[2] & 0xff) << 8) | (sockaddr[3] & 0xff);
        // Traffic during the burst: the server's progress thread reads empty sockets (EAGAIN)
        // between its event-queue reads, as a loaded server does.
        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        peer.send(0, peer.allocate(64)).get(10, TimeUnit.SECONDS);
        assertTrue(arrived.await(10, TimeUnit.SECONDS));
        java.util.concurrent.atomic.AtomicBoolean bursting = new java.util.concurrent.atomic.AtomicBoolean(true);
        Thread traffic = Thread.ofVirtual().start(() -> {
            while (bursting.get()) {
                try {
                    peer.send(0, peer.allocate(64)).get(10, TimeUnit.SECONDS);
                } catch (Exception e) {
                    return;
                }
            }
        });
        long before = descriptors();

        // Before, the provider accepted one connection per event-queue read, a read per 10 ms
        // while idle: these sat in the backlog, in CLOSE-WAIT, for 20 s.
        for (int i = 0; i < 2_000; i++) {
            new Socket("127.0.0.1", port).close();
        }
        for (int i = 0; i < 50; i++) {
            try (Socket s = new Socket("127.0.0.1", port)) {
                s.getOutputStream().write(new byte[] {1, 2, 3, 4, 5});
            }
        }
        for (int i = 0; i < 50; i++) {
            try (Socket s = new Socket("127.0.0.1", port)) {
                s.getOutputStream().write(connectionRequest(0x7fff0000 + i));
            }
        }
        List<Socket> waiting = new ArrayList<>();
        try {
            for (int i = 0; i < 20; i++) {
                Socket s = new Socket("127.0.0.1", port);
                waiting.add(s);
                s.getOutputStream().write(connectionRequest(0x6fff0000 + i));
            }
            for (Socket s : waiting) {
                s.setSoTimeout(10_000);
                assertRefused(s);
            }
        } finally {
            for (Socket s : waiting) {
                s.close();
            }
        }
        bursting.set(false);
        traffic.join();
        assertTrue(waitFor(() -> closeWait(port) == 0 && descriptors() <= before + 2, 10_000),
                () -> closeWait(port) + " sockets in CLOSE-WAIT on the provider's port, " + descriptors()
                        + " descriptors open against " + before + " before the burst");

        Transport another = open(config, (from, m) -> m.release());
        Peer second = another.connect(server.localAddress());
        second.send(0, second.allocate(64)).get(10, TimeUnit.SECONDS);
        assertTrue(peer.isOpen());
    }

    /** A connection request as libfabric's tcp provider sends it, naming link {@code id}. */
    private static byte[] connectionRequest(int id) {
        ByteBuffer b = ByteBuffer.allocate(CM_HEADER + 4).order(ByteOrder.BIG_ENDIAN);
        b.put(TCPX_CTRL_HDR_VERSION).put(CONNREQ).putShort((short) 4).putInt(0).putLong(0).putLong(0);
        b.order(ByteOrder.LITTLE_ENDIAN).putLong(1).putInt(id);
        return b.array();
    }

    /** The provider answers an unknown link's request with a refusal (NACK), then closes. */
    private static void assertRefused(Socket socket) throws IOException {
        DataInputStream in = new DataInputStream(socket.getInputStream());
        try {
            byte[] header = new byte[CM_HEADER];
            in.readFully(header);
            assertEquals(NACK, header[1], "not a refusal");
            assertEquals(-1, in.read());
        } catch (SocketException e) {
            // reset after the refusal: closed too
        }
    }

    private static long descriptors() {
        try (var fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    private static long closeWait(int port) {
        long n = 0;
        for (String table : new String[] {"/proc/net/tcp", "/proc/net/tcp6"}) {
            try {
                for (String line : Files.readAllLines(Path.of(table))) {
                    String[] f = line.trim().split("\\s+");
                    if (f.length > 3 && f[3].equals(CLOSE_WAIT) && f[1].endsWith(String.format(":%04X", port))) {
                        n++;
                    }
                }
            } catch (IOException e) {
                // no IPv6
            }
        }
        return n;
    }
}
