package dev.ferry.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.ferry.transport.TransportException.Reason;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every failure a caller can meet through the public API carries the {@link Reason} a caller
 * acts on: bad input, a limit, an exhausted pool, a closed peer or transport, an unreachable
 * address, a failed authentication. A transport module subclasses it and names its configuration.
 */
public abstract class AbstractFailureReasonTest {

    private static final String HOST = System.getProperty("ferry.host", "127.0.0.1");
    private static final MessageHandler RELEASE = (from, message) -> message.release();

    private final List<Transport> opened = new CopyOnWriteArrayList<>();

    /** The configuration under test. */
    protected abstract TransportConfig config();

    /** Whether the transport itself authenticates peers (else the RPC layer does). */
    protected boolean authenticates() {
        return true;
    }

    /** An address the transport cannot parse, or null where every string may name a peer. */
    protected String malformedAddress() {
        return "no-port";
    }

    private Transport open(TransportConfig config, MessageHandler handler) {
        Transport transport = Transports.open(config.withBindHost(HOST), handler);
        opened.add(transport);
        return transport;
    }

    @AfterEach
    void closeTransports() {
        for (Transport transport : opened) {
            transport.close();
        }
        opened.clear();
    }

    private static Reason reasonOf(Throwable thrown) {
        Throwable t = thrown instanceof CompletionException && thrown.getCause() != null ? thrown.getCause() : thrown;
        assertTrue(t instanceof TransportException, "not a transport failure: " + t);
        return ((TransportException) t).reason();
    }

    @Test
    @Timeout(60)
    void badInputIsSaidToBeBadInput() {
        Transport server = open(config(), RELEASE);
        Transport client = open(config(), RELEASE);
        Peer peer = client.connect(server.localAddress());
        int limit = config().maxMessageSize();
        assertEquals(Reason.BAD_INPUT, assertThrows(TransportException.class, () -> peer.allocate(limit + 1)).reason());
        assertEquals(Reason.BAD_INPUT, assertThrows(TransportException.class, () -> peer.tryAllocate(-1)).reason());
        String malformed = malformedAddress();
        if (malformed != null) {
            assertEquals(Reason.BAD_INPUT, assertThrows(TransportException.class, () -> client.connect(malformed)).reason());
        }
    }

    @Test
    @Timeout(60)
    void anAddressNobodyListensOnIsUnreachable() {
        Transport client = open(config().withConnectTimeoutMillis(2_000), RELEASE);
        try (RefusedPort refused = RefusedPort.on(HOST)) {
            TransportException e = assertThrows(TransportException.class, () -> client.connect(refused.address()));
            assertTrue(e.reason() == Reason.UNREACHABLE || e.reason() == Reason.TIMEOUT, "reason " + e.reason() + ": " + e);
        }
    }

    @Test
    @Timeout(60)
    void aClosedPeerOrTransportSaysClosed() throws Exception {
        Transport server = open(config(), RELEASE);
        Transport client = open(config(), RELEASE);
        Peer peer = client.connect(server.localAddress());
        OutboundMessage kept = peer.allocate(16);
        peer.close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (peer.isOpen() && System.nanoTime() < deadline) {
            Thread.sleep(1); // a transport may tear the peer down on its own thread
        }
        assertEquals(Reason.CLOSED, assertThrows(TransportException.class, () -> peer.allocate(16)).reason(),
                "allocate on a peer the application closed");
        Throwable sent = assertThrows(CompletionException.class, () -> peer.send(0, kept).join());
        assertEquals(Reason.CLOSED, reasonOf(sent), "send on a peer the application closed: " + sent);
        client.close();
        assertEquals(Reason.CLOSED, assertThrows(TransportException.class,
                () -> client.connect(server.localAddress())).reason());
    }

    @Test
    @Timeout(60)
    void aPeerThatGoesAwayIsAFailedPeer() throws Exception {
        Transport server = open(config(), RELEASE);
        CountDownLatch closed = new CountDownLatch(1);
        List<Throwable> causes = new CopyOnWriteArrayList<>();
        Transport client = open(config(), new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                message.release();
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                causes.add(cause);
                closed.countDown();
            }
        });
        Peer peer = client.connect(server.localAddress());
        peer.send(0, peer.allocate(8)).join();
        server.close();
        assertTrue(closed.await(30, TimeUnit.SECONDS), "the client never saw the server go");
        assertEquals(Reason.PEER_FAILED, reasonOf(causes.getFirst()), "onPeerClosed: " + causes.getFirst());
        TransportException e = assertThrows(TransportException.class, () -> peer.allocate(8));
        assertEquals(Reason.PEER_FAILED, e.reason(), "allocate on a failed peer: " + e);
    }

    @Test
    @Timeout(60)
    void anExhaustedSendPoolIsBackPressure() {
        TransportConfig small = config().withPools(1L << 20, config().receivePoolBytes(), config().rendezvousPoolBytes())
                .withConnectTimeoutMillis(2_000);
        Transport server = open(config(), RELEASE);
        Transport client = open(small, RELEASE);
        Peer peer = client.connect(server.localAddress());
        List<OutboundMessage> held = new ArrayList<>();
        try {
            TransportException e = null;
            for (int i = 0; i < 1_000 && e == null; i++) {
                try {
                    held.add(peer.allocate(64 << 10));
                } catch (TransportException t) {
                    e = t;
                }
            }
            assertNotNull(e, "a 1 MiB send pool gave out 1,000 buffers of 64 KiB");
            assertEquals(Reason.POOL_EXHAUSTED, e.reason(), e.toString());
        } finally {
            held.forEach(OutboundMessage::release);
        }
    }

    @Test
    @Timeout(60)
    void aWrongSecretIsUnauthenticated() {
        assumeTrue(authenticates(), "this transport leaves authentication to the RPC layer");
        Transport server = open(config().withSecret(SharedSecret.of("the server's secret, 32 bytes long")), RELEASE);
        Transport client = open(config().withSecret(SharedSecret.of("another secret, also long enough!!")), RELEASE);
        TransportException e = assertThrows(TransportException.class, () -> client.connect(server.localAddress()));
        assertEquals(Reason.UNAUTHENTICATED, e.reason(), e.toString());
    }
}
