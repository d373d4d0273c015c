package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * A peer torn down while a rendezvous read of it is half received. libfabric's tcp provider
 * before 1.18 completes and frees such a read twice when its endpoint is closed (the read's
 * entry is both the one being received and the head of the queue of reads, and the close
 * flushes both): an error completion with context 0 comes out, and the provider's pool of
 * transfer entries, shared by every endpoint of the completion queue, is corrupt from then on;
 * other peers' traffic then stalls or completes as empty receives. The endpoint must stay open
 * until its reads have ended, so that the provider ends them itself, once.
 *
 * <p>To hold a read half received, the sender's progress thread is held in a task of its own
 * (the provider serves a read from the sender's own progress, so the answer stops there) once
 * the receiver has taken part of a read far larger than the socket buffers.
 */
class HalfReadTeardownTest extends FabricTransportFixture {

    private static final byte PATTERN = 0x5A;
    /** One read of the whole message: far beyond what loopback sockets buffer. */
    private static final int SIZE = 48 << 20;

    @Test
    @Timeout(180)
    void aPeerTornDownMidReadLeavesTheProviderSoundForTheOthers() throws Exception {
        TransportConfig config = config();
        ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
        AtomicInteger fromSurvivor = new AtomicInteger();
        Transport[] clients = new Transport[2];
        Transport server = open(config, (from, message) -> {
            try {
                if (clients[1] != null && from.address().equals(clients[1].localAddress())) {
                    long seq = message.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                    String problem = check(message.segment(), message.stream(), seq);
                    if (problem != null) {
                        errors.add(problem);
                    }
                    fromSurvivor.incrementAndGet();
                } else {
                    errors.add("a message of " + message.segment().byteSize() + " bytes from the torn-down peer");
                }
            } finally {
                message.release();
            }
        });
        FabricTransport receiver = (FabricTransport) server;
        clients[0] = open(config, (from, message) -> message.release());
        FabricTransport sender = (FabricTransport) clients[0];
        Peer toServer = clients[0].connect(server.localAddress());
        FabricPeer doomed = (FabricPeer) server.connect(clients[0].localAddress());

        CompletableFuture<Void> bigSent = sendBig(toServer);
        CountDownLatch resume = stopWithReadHalfReceived(receiver, sender, doomed);
        try {
            doomed.close(); // the receiver tears the peer down, its read half received
            assertTrue(waitFor(() -> doomed.failure() != null && !receiver.peers.containsValue(doomed), 30_000),
                    "the peer was not torn down");
            Thread.sleep(100); // the teardown's turn, and the next ones, run meanwhile
            assertTrue(receiver.proxy.call(() -> receiver.links.closing()),
                    "the torn-down link's endpoint did not wait for its read");
        } finally {
            resume.countDown();
        }
        // The sender answers the read or hears of the teardown and closes: either way the read ends.
        assertTrue(waitFor(() -> !receiver.proxy.call(() -> receiver.links.closing()), 30_000),
                "the torn-down link's endpoint never closed");
        try {
            bigSent.get(30, TimeUnit.SECONDS);
        } catch (Exception expected) {
            // the receiver closed the peer: whether the sender heard of it first does not matter
        }
        clients[0].close();

        // Another peer's traffic, eager and rendezvous, all arrives whole.
        clients[1] = open(config, (from, message) -> message.release());
        Peer survivor = clients[1].connect(server.localAddress());
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        int messages = 16;
        for (int i = 0; i < messages; i++) {
            OutboundMessage m = survivor.allocate(i % 2 == 0 ? 1000 + i : (1 << 20) + 4099 + i);
            fill(m.segment(), i % 2, i);
            sends.add(survivor.send(i % 2, m));
        }
        CompletableFuture.allOf(sends.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> fromSurvivor.get() == messages, 30_000), "delivered " + fromSurvivor.get());
        assertEquals(List.of(), new ArrayList<>(errors));
        assertEquals(0, receiver.counters.strayCompletions.sum(),
                "completions for no operation of the receiver's: the provider completed one twice");
        assertEquals(0, receiver.counters.truncatedFrames.sum(), "receives that brought no whole frame header");
        assertTrue(waitFor(() -> server.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS).buffersInUse() == 0,
                30_000), "rendezvous buffers left: " + server.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS));
        assertNull(((FabricPeer) survivor).failure(), "the survivor failed");
        // The orphaned read and the survivor's pulls are all accounted for: nothing in flight or waiting.
        assertTrue(waitFor(() -> !receiver.proxy.call(() -> receiver.pulls.busy()), 30_000),
                "the receiver's puller still counts reads in flight or waiting");
    }

    /**
     * A torn-down link whose peer is alive but never answers its read: its endpoint closes after
     * the grace, and the read's target goes back to its pool.
     */
    @Test
    @Timeout(180)
    void aTornDownLinkWhosePeerNeverAnswersClosesAfterTheGrace() throws Exception {
        HalfRead half = halfRead();
        FabricTransport receiver = half.receiver();
        FabricPeer doomed = half.doomed();
        try {
            long start = System.nanoTime();
            doomed.close();
            assertTrue(waitFor(() -> receiver.proxy.call(() -> receiver.links.closing()), 10_000),
                    "the torn-down link's endpoint did not wait for its read");
            assertTrue(waitFor(() -> !receiver.proxy.call(() -> receiver.links.closing()), 30_000),
                    "the torn-down link's endpoint never closed");
            assertTrue(System.nanoTime() - start >= LinkTeardown.CLOSE_GRACE_NANOS, "closed before the grace was over");
            assertTrue(waitFor(() -> receiver.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS).buffersInUse() == 0,
                    10_000), "the read's target was not released: "
                            + receiver.allocatorStats().orElseThrow().pool(PoolKind.RENDEZVOUS));
        } finally {
            half.resume().countDown();
        }
    }

    /** The receiver closed while a torn-down link waits for its read: the shutdown closes it, and ends. */
    @Test
    @Timeout(180)
    void aReceiverClosedWhileATornDownLinkWaitsForItsReadStops() throws Exception {
        HalfRead half = halfRead();
        FabricTransport receiver = half.receiver();
        FabricPeer doomed = half.doomed();
        try {
            doomed.close();
            assertTrue(waitFor(() -> receiver.proxy.call(() -> receiver.links.closing()), 10_000),
                    "the torn-down link's endpoint did not wait for its read");
            receiver.close();
            assertTrue(receiver.loop.finished(), "the receiver's progress thread did not finish its shutdown");
        } finally {
            half.resume().countDown();
        }
    }

    /** A receiver, a sender, the receiver's peer for the sender, and the latch that lets the stopped sender go on. */
    private record HalfRead(FabricTransport receiver, FabricTransport sender, FabricPeer doomed, CountDownLatch resume) {
    }

    /**
     * Two transports, the big message sent from one to the other, and the sender's progress held
     * once the receiver has part of its read.
     */
    private HalfRead halfRead() throws Exception {
        TransportConfig config = config();
        FabricTransport receiver = (FabricTransport) open(config, (from, message) -> message.release());
        FabricTransport sender = (FabricTransport) open(config, (from, message) -> message.release());
        Peer toServer = sender.connect(receiver.localAddress());
        FabricPeer doomed = (FabricPeer) receiver.connect(sender.localAddress());
        sendBig(toServer);
        return new HalfRead(receiver, sender, doomed, stopWithReadHalfReceived(receiver, sender, doomed));
    }

    /** Sends the big message, filled with {@link #PATTERN}, on {@code to}. */
    private static CompletableFuture<Void> sendBig(Peer to) {
        OutboundMessage big = to.allocate(SIZE);
        big.segment().fill(PATTERN);
        return to.send(0, big);
    }

    /**
     * Stops {@code sender}'s progress once the receiver has taken part of the read of the big
     * message, and not all of it; the sender goes on once the latch returned is counted down.
     */
    private static CountDownLatch stopWithReadHalfReceived(FabricTransport receiver, FabricTransport sender,
            FabricPeer doomed) throws Exception {
        assertTrue(waitFor(() -> receiver.pulls.readsPosted() > 0, 30_000), "the read was never posted");
        for (int attempt = 0; attempt < 2_000; attempt++) {
            CountDownLatch resume = freeze(sender);
            Thread.sleep(20); // the receiver drains what the sockets hold
            int state = readState(receiver, doomed);
            if (state == 0) {
                return resume;
            }
            resume.countDown();
            assertTrue(state < 0, "the read completed before the sender could be stopped");
            Thread.sleep(1);
        }
        throw new AssertionError("the sender was never stopped with its read half received");
    }

    /**
     * Stops {@code transport}'s progress thread, and with it every libfabric call of the
     * transport (its provider progresses only inside them), until the latch returned is counted down.
     */
    private static CountDownLatch freeze(FabricTransport transport) throws Exception {
        CountDownLatch stopped = new CountDownLatch(1);
        CountDownLatch resume = new CountDownLatch(1);
        transport.proxy.run(() -> {
            stopped.countDown();
            try {
                resume.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        assertTrue(stopped.await(30, TimeUnit.SECONDS), "the progress thread did not stop");
        return resume;
    }

    /**
     * The state of the read of the big message, looked at on the receiver's progress thread: -1
     * not started (or no read yet), 0 half received, 1 complete.
     */
    private static int readState(FabricTransport receiver, FabricPeer doomed) throws Exception {
        return receiver.proxy.call(() -> {
            for (Link link : doomed.links) {
                ArrayDeque<InboundFrame> held = link.heldBack.get(0);
                InboundFrame message = held == null ? null : held.peek();
                if (message == null || message.target == null || message.requested == 0) {
                    continue;
                }
                MemorySegment body = message.target.segment();
                boolean first = body.get(ValueLayout.JAVA_BYTE, 0) == PATTERN;
                boolean last = body.get(ValueLayout.JAVA_BYTE, message.requested - 1) == PATTERN;
                return !first ? -1 : last ? 1 : 0;
            }
            return -1;
        });
    }

    /** tcp, one read per message however large, room for the big message on both sides. */
    private static TransportConfig config() {
        TransportConfig d = TransportConfig.defaults("tcp");
        return new TransportConfig(d.provider(), d.bindHost(), d.bindPort(), d.linksPerPeer(), d.maxLinks(),
                d.eagerThreshold(), d.receiveBuffersPerLink(), d.sendWindowBytesPerLink(), d.sendWindowBytesPerPeer(),
                d.sendWindowBytesPerProcess(), 96L << 20, d.receivePoolBytes(), 96L << 20, SIZE,
                d.maxMessageSize(), d.connectTimeoutMillis(), d.heartbeatIntervalMillis(), d.heartbeatTimeoutMillis(),
                d.secret(), d.idlePollMicros(), 0, d.handshakeTimeoutMillis(), 0);
    }
}
