package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.ValueLayout;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * A link trimmed to the credit floor (an idle peer's) that carries a message again goes quiet
 * afterwards: the two ends do not trade credit-only frames, each of which takes a buffer of its
 * receiver, for ever. Before this held, such a link carried one credit frame per round trip in
 * each direction for as long as the transports lived (a third of an emulated network's CPU).
 */
@Timeout(60)
class IdleLinkCreditTest extends FabricTransportFixture {

    private static long creditFrames(Transport t) {
        return t.counters().creditFramesSent();
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aLinkAtTheCreditFloorGoesQuietAfterAMessage(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withLinks(1, 64);
        CopyOnWriteArrayList<Integer> received = new CopyOnWriteArrayList<>();
        Transport server = open(config, (from, m) -> {
            received.add(m.segment().get(ValueLayout.JAVA_INT_UNALIGNED, 0));
            m.release();
        });
        assumeTrue(((FabricTransport) server).sharesReceiveQueue(), provider + " links have receive queues of their own");
        Transport client = open(config, (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        send(peer, 0);
        // Idle: the server takes the link's credits back down to the floor.
        int floor = CreditBalancer.CREDIT_FLOOR;
        assertTrue(waitFor(() -> client.counters().creditsAvailable() <= floor, 10_000),
                () -> "the idle client still holds " + client.counters().creditsAvailable() + " credits");
        for (int i = 1; i <= 3; i++) {
            send(peer, i);
        }
        assertTrue(waitFor(() -> received.size() == 4, 10_000), "received " + received);
        Thread.sleep(300); // what is owed settles: at most a flush per review period
        long before = creditFrames(server) + creditFrames(client);
        Thread.sleep(1_000);
        long during = creditFrames(server) + creditFrames(client) - before;
        assertTrue(during <= 2, during + " credit-only frames in a quiet second\nserver:\n"
                + ((FabricTransport) server).describeLinks() + "\nclient:\n" + ((FabricTransport) client).describeLinks());
        // The link still works both ways at the floor, in order.
        for (int i = 4; i < 40; i++) {
            send(peer, i);
        }
        assertTrue(waitFor(() -> received.size() == 40, 10_000), "received " + received.size());
        for (int i = 0; i < 40; i++) {
            assertEquals(i, received.get(i));
        }
        assertEquals(0, server.counters().linkFailures());
        assertEquals(0, client.counters().linkFailures());
    }

    private static void send(Peer peer, int seq) throws Exception {
        OutboundMessage m = peer.allocate(64);
        m.segment().set(ValueLayout.JAVA_INT_UNALIGNED, 0, seq);
        peer.send(0, m).get(10, TimeUnit.SECONDS);
    }
}
