package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The send window's three caps (link, peer, process), each hit on its own. */
class SendWindowTest {

    private final List<Socket> sockets = new ArrayList<>();

    @AfterEach
    void close() throws Exception {
        for (Socket s : sockets) {
            s.close();
        }
    }

    /** A peer with {@code links} links; its control channel is a loopback socket nobody reads. */
    private FabricPeer peer(String name, int links) throws Exception {
        try (ServerSocket server = new ServerSocket()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            Socket client = new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort());
            sockets.add(client);
            sockets.add(server.accept());
            FabricPeer peer = new FabricPeer(null, name, client, links);
            Link[] made = new Link[links];
            for (int i = 0; i < links; i++) {
                made[i] = new Link(peer, i, 0, new ReceiveCredits(8, 8));
            }
            peer.links = made;
            return peer;
        }
    }

    @Test
    void aLinkIsCappedOnItsOwn() throws Exception {
        SendWindow window = new SendWindow(100, 1_000, 10_000, 1_000_000);
        FabricPeer p = peer("a", 2);
        assertTrue(window.tryAcquire(p.links[0], 60));
        assertFalse(window.tryAcquire(p.links[0], 50), "link window is 100");
        assertTrue(window.tryAcquire(p.links[1], 50), "the other link has its own window");
        window.release(p.links[0], 60);
        assertTrue(window.tryAcquire(p.links[0], 50));
        assertEquals(100, window.inFlight());
    }

    @Test
    void aPeerIsCappedAcrossItsLinks() throws Exception {
        SendWindow window = new SendWindow(100, 150, 10_000, 1_000_000);
        FabricPeer p = peer("a", 2);
        assertTrue(window.tryAcquire(p.links[0], 100));
        assertFalse(window.tryAcquire(p.links[1], 60), "peer window is 150");
        assertTrue(window.tryAcquire(p.links[1], 50));
    }

    @Test
    void theProcessIsCappedAcrossPeers() throws Exception {
        SendWindow window = new SendWindow(100, 100, 250, 1_000_000);
        FabricPeer a = peer("a", 1);
        FabricPeer b = peer("b", 1);
        FabricPeer c = peer("c", 1);
        assertTrue(window.tryAcquire(a.links[0], 100));
        assertTrue(window.tryAcquire(b.links[0], 100));
        assertFalse(window.tryAcquire(c.links[0], 100), "process window is 250");
        assertTrue(window.tryAcquire(c.links[0], 50));
        assertEquals(250, window.peak());
        window.release(a.links[0], 100);
        window.release(b.links[0], 100);
        window.release(c.links[0], 50);
        assertEquals(0, window.inFlight());
        assertEquals(250, window.peak(), "the peak stays");
    }

    @Test
    void aLargeTransferDoesNotHoldBackSmallMessagesOnTheSameLink() throws Exception {
        SendWindow window = new SendWindow(100, 200, 10_000, 10);
        FabricPeer p = peer("a", 1);
        assertTrue(window.tryAcquire(p.links[0], 1_000), "a rendezvous passes alone");
        assertFalse(window.tryAcquire(p.links[0], 500), "a second one waits for it");
        for (int i = 0; i < 10; i++) {
            assertTrue(window.tryAcquire(p.links[0], 10), "eager message " + i);
        }
        assertFalse(window.tryAcquire(p.links[0], 10), "the link's eager window is full too now");
        assertEquals(1_100, window.inFlight());
        window.release(p.links[0], 1_000);
        assertTrue(window.tryAcquire(p.links[0], 500));
    }

    @Test
    void theProcessWindowCountsEagerAndRendezvousTogether() throws Exception {
        SendWindow window = new SendWindow(1_000, 1_000, 1_000, 10);
        FabricPeer p = peer("a", 1);
        assertTrue(window.tryAcquire(p.links[0], 995));
        assertTrue(window.tryAcquire(p.links[0], 5));
        assertFalse(window.tryAcquire(p.links[0], 1), "1,000 bytes in flight in the process");
        assertEquals(1_000, window.peak());
    }

    @Test
    void aMessageLargerThanTheWindowPassesAloneWhenTheWindowIsEmpty() throws Exception {
        SendWindow window = new SendWindow(100, 100, 100, 1_000_000);
        FabricPeer p = peer("a", 1);
        assertTrue(window.tryAcquire(p.links[0], 1_000), "an empty window lets a large message pass");
        assertFalse(window.tryAcquire(p.links[0], 1), "and nothing else until it completes");
        window.release(p.links[0], 1_000);
        assertTrue(window.tryAcquire(p.links[0], 1));
    }
}
