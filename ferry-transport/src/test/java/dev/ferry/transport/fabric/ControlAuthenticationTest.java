package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * Peers prove they hold the shared secret on the control channel before either side says
 * anything about its fabric: a peer without it gets no fabric address, no link and no key.
 */
@Timeout(60)
class ControlAuthenticationTest extends FabricTransportFixture {

    private static final SharedSecret SECRET = SharedSecret.of("the cluster's own secret, 32 bytes");
    private static final SharedSecret WRONG = SharedSecret.of("somebody else's secret, 32 bytes!");


    private static TransportConfig config(String provider, SharedSecret secret) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 16L << 20).withSecret(secret);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void peersWithTheSameSecretConnect(String provider) throws Exception {
        CountDownLatch arrived = new CountDownLatch(1);
        Transport server = open(config(provider, SECRET), (from, m) -> {
            m.release();
            arrived.countDown();
        });
        Transport client = open(config(provider, SECRET), (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        peer.send(0, peer.allocate(100)).get(10, TimeUnit.SECONDS);
        assertTrue(arrived.await(10, TimeUnit.SECONDS));
        assertEquals(0, ((FabricTransport) server).authenticationFailures());
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aPeerWithTheWrongSecretGetsNothing(String provider) throws Exception {
        Transport server = open(config(provider, SECRET), (from, m) -> m.release());
        Transport client = open(config(provider, WRONG), (from, m) -> m.release());
        TransportException e = assertThrows(TransportException.class, () -> client.connect(server.localAddress()));
        assertTrue(e.getMessage().contains("authentication"), e.getMessage());
        assertTrue(waitFor(() -> ((FabricTransport) server).authenticationFailures() == 1, 10_000), "the server did not count it");
        assertEquals(0, server.counters().linksOpen());
        assertEquals(0, client.counters().linksOpen());
        // The server still serves peers that hold the secret.
        Transport good = open(config(provider, SECRET), (from, m) -> m.release());
        Peer friend = good.connect(server.localAddress());
        friend.send(0, friend.allocate(8)).get(10, TimeUnit.SECONDS);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aPeerWithoutASecretIsRefusedByOneThatHasOne(String provider) throws Exception {
        Transport server = open(config(provider, SECRET), (from, m) -> m.release());
        Transport client = open(config(provider, null), (from, m) -> m.release());
        TransportException e = assertThrows(TransportException.class, () -> client.connect(server.localAddress()));
        assertTrue(e.getMessage().contains("requires the shared secret"), e.getMessage());
        assertEquals(1, ((FabricTransport) server).authenticationFailures());
        assertEquals(0, server.counters().linksOpen());
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp"})
    void aPeerWithASecretRefusesOneWithout(String provider) throws Exception {
        Transport server = open(config(provider, null), (from, m) -> m.release());
        Transport client = open(config(provider, SECRET), (from, m) -> m.release());
        TransportException e = assertThrows(TransportException.class, () -> client.connect(server.localAddress()));
        assertTrue(e.getMessage().contains("no shared secret"), e.getMessage());
        assertEquals(0, client.counters().linksOpen());
    }
}
