package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.memory.PoolKind;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * Frames longer than the receiver's buffers. A Ferry sender never sends one: the eager limit
 * both sides agree on keeps longer messages to rendezvous, which the receiver pulls into a buffer
 * of their size. A peer that ignores the limit (here: a client whose package-private {@link
 * FabricPeer#eagerLimit} is raised) sends them anyway, and the receiver must survive it.
 *
 * <p>On shm, frames of more than 4 KiB (past shm's inject buffers, moved by CMA) cannot be
 * survived on libfabric 1.17: see {@link #shmReceiverSurvivesOversizeFramesByCma} and "Frames
 * longer than the receive buffers" in {@code docs/fabric-transport.md}.
 */
@Timeout(120)
class OversizeFrameTest extends FabricTransportFixture {

    /** The server's receive buffers: 256 bytes, so that every size below is past them. */
    private static TransportConfig smallBuffers(TransportConfig base) {
        return base.withFlowControl(256, 64, 4L << 20, 8L << 20, 64L << 20);
    }

    private static TransportConfig base(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 1L << 20, 16L << 20);
    }

    @ParameterizedTest
    @ValueSource(ints = {5 * 1024, 64 * 1024, 1 << 20})
    void aSenderThatKeepsTheLimitSendsLongMessagesByRendezvousToSmallShmBuffers(int size) throws Exception {
        // The ordinary path: the same sizes, the eager limit left as negotiated. Each goes as a
        // rendezvous request and is pulled, so no frame is longer than the server's buffers.
        List<Long> seen = new CopyOnWriteArrayList<>();
        AtomicReference<String> wrong = new AtomicReference<>();
        FabricTransport server = (FabricTransport) open(smallBuffers(base("shm")), (from, m) -> {
            long seq = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            String problem = check(m.segment(), 0, seq);
            if (problem != null || m.segment().byteSize() != size) {
                wrong.compareAndSet(null, problem != null ? problem : "message of " + m.segment().byteSize() + " bytes");
            }
            seen.add(seq);
            m.release();
        });
        Transport client = open(base("shm"), (from, m) -> m.release());
        Peer peer = client.connect(server.localAddress());
        int count = 20;
        for (int i = 0; i < count; i++) {
            sendSeq(peer, i, size).get(20, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> seen.size() == count, 20_000), () -> seen.size() + " of " + count + " arrived");
        assertNull(wrong.get());
        for (int i = 0; i < count; i++) {
            assertEquals(i, seen.get(i));
        }
        assertTrue(client.counters().rendezvousSent() >= count, "sent eager: " + client.counters());
        assertEquals(0, server.counters().linkFailures());
        assertTrue(waitFor(() -> server.counters().receiveBuffersHeld() == 0, 10_000));
        assertQueueCountedRight(server);
    }

    @Disabled("libfabric 1.17 shm: a CMA message longer than the posted receive spins the receiver's progress thread"
            + " for ever in smr_cma_loop (prov/shm/src/smr.h), process_vm_readv with an empty local iovec returning 0;"
            + " see docs/fabric-transport.md, 'Frames longer than the receive buffers'")
    @ParameterizedTest
    @ValueSource(ints = {5 * 1024, 64 * 1024, 1 << 20})
    void shmReceiverSurvivesOversizeFramesByCma(int size) throws Exception {
        hostileSenderLeavesTheOthersServed("shm", size, true);
    }

    @ParameterizedTest
    @ValueSource(ints = {2 * 1024})
    void shmReceiverSurvivesOversizeFramesWithinAnInject(int size) throws Exception {
        // FI_ETRUNC: shm's error completion names no sender, so no link can be failed for it.
        hostileSenderLeavesTheOthersServed("shm", size, false);
    }

    @ParameterizedTest
    @ValueSource(ints = {2 * 1024, 5 * 1024, 64 * 1024, 1 << 20})
    void tcpReceiverSurvivesOversizeFrames(int size) throws Exception {
        // tcp's provider drops the hostile's connection: its next send fails and it goes.
        hostileSenderLeavesTheOthersServed("tcp", size, true);
    }

    /**
     * A hostile client sends frames of {@code size} bytes to a server whose receive buffers hold
     * 256, while a bystander streams small messages to the same server: the bystander's messages
     * keep arriving, in order, with no gap of more than {@link #GAP_MILLIS} ms; the hostile's frames
     * are never delivered; the shared queue's count of buffers posted stays the buffers in use;
     * and, if {@code hostileFails}, the server ends up failing the hostile peer, with a reason.
     */
    private void hostileSenderLeavesTheOthersServed(String provider, int size, boolean hostileFails) throws Exception {
        List<Long> fromBystander = new CopyOnWriteArrayList<>();
        AtomicLong hostileDelivered = new AtomicLong();
        AtomicLong lastArrival = new AtomicLong(System.nanoTime());
        AtomicLong longestGap = new AtomicLong();
        AtomicReference<Peer> hostileAtServer = new AtomicReference<>();
        FabricTransport server = (FabricTransport) open(smallBuffers(base(provider)), (from, m) -> {
            long now = System.nanoTime();
            long tag = m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
            if (tag < 0) { // the hostile's first, well-behaved message
                hostileAtServer.set(from);
            } else if (m.segment().byteSize() > 64) {
                hostileDelivered.incrementAndGet();
            } else {
                longestGap.accumulateAndGet(now - lastArrival.getAndSet(now), Math::max);
                fromBystander.add(tag);
            }
            m.release();
        });
        assumeTrue(server.sharesReceiveQueue(), provider + " links have receive queues of their own");
        Transport hostile = open(base(provider), (from, m) -> m.release());
        Peer hostilePeer = hostile.connect(server.localAddress());
        sendSeq(hostilePeer, -1, 64).get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> hostileAtServer.get() != null, 10_000));

        Transport bystander = open(base(provider), (from, m) -> m.release());
        Peer bystanderPeer = bystander.connect(server.localAddress());
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong sent = new AtomicLong();
        AtomicReference<Throwable> bystanderFailure = new AtomicReference<>();
        Thread streaming = Thread.ofPlatform().name("bystander").start(() -> {
            try {
                for (long seq = 0; !stop.get(); seq++) {
                    CompletableFuture<Void> f = sendSeq(bystanderPeer, seq, 64);
                    f.get(10, TimeUnit.SECONDS);
                    sent.set(seq + 1);
                    Thread.sleep(1);
                }
            } catch (Throwable e) {
                bystanderFailure.compareAndSet(null, e);
            }
        });
        try {
            assertTrue(waitFor(() -> fromBystander.size() > 50, 10_000), "the bystander was not served before");
            lastArrival.set(System.nanoTime());
            longestGap.set(0);

            FabricPeer toServer = (FabricPeer) hostilePeer;
            ((FabricTransport) hostile).proxy.call(() -> toServer.eagerLimit = 4 << 20); // past the server's 256 bytes
            for (int i = 0; i < 5; i++) {
                try {
                    OutboundMessage big = hostilePeer.allocate(size);
                    fill(big.segment(), 0, 1_000_000 + i);
                    hostilePeer.send(0, big).get(5, TimeUnit.SECONDS);
                } catch (Exception e) {
                    // Its send may fail, or its link (tcp's provider drops the connection of a
                    // truncated receive): only the server matters.
                }
            }
            Thread.sleep(500); // the bystander keeps streaming meanwhile
        } finally {
            stop.set(true);
            streaming.join(30_000);
        }
        assertNull(bystanderFailure.get(), "the bystander's send failed");
        long total = sent.get();
        assertTrue(waitFor(() -> fromBystander.size() == total, 10_000),
                () -> "the bystander's messages arrived: " + fromBystander.size() + " of " + total + "\n" + server.describeLinks());
        for (int i = 0; i < total; i++) {
            assertEquals(i, fromBystander.get(i), "the bystander's order");
        }
        System.out.println("ferry-test: " + provider + ", frames of " + size + " bytes: the bystander's longest wait "
                + longestGap.get() / 1_000_000 + " ms over " + total + " messages");
        assertTrue(longestGap.get() < TimeUnit.MILLISECONDS.toNanos(GAP_MILLIS),
                "the bystander waited " + longestGap.get() / 1_000_000 + " ms for a message");
        assertEquals(0, hostileDelivered.get(), "an oversize frame was delivered");
        assertEquals(0, bystander.counters().linkFailures());
        FabricPeer hostileHere = (FabricPeer) hostileAtServer.get();
        if (hostileFails) {
            assertTrue(waitFor(() -> hostileHere.failure() != null, 10_000), "the hostile peer was not failed");
            Throwable failure = hostileHere.failure();
            TransportException.Reason reason = failure instanceof TransportException t ? t.reason() : null;
            assertTrue(reason == TransportException.Reason.PEER_FAILED || reason == TransportException.Reason.BAD_INPUT,
                    "the hostile peer failed with " + failure);
        }
        assertTrue(waitFor(() -> server.counters().receiveBuffersHeld() == 0, 10_000));
        assertQueueCountedRight(server);
    }

    /**
     * How long the bystander may wait for its next message while the hostile sends: a liveness
     * bound, not a speed (the stall on shm is for ever, a link torn down and made again takes
     * tens of milliseconds); far above what a loaded two-core machine's scheduling adds.
     */
    private static final long GAP_MILLIS = 5_000;

    private static void assertQueueCountedRight(FabricTransport server) throws InterruptedException {
        if (!server.sharesReceiveQueue()) {
            return;
        }
        assertTrue(waitFor(() -> server.allocator().stats().pool(PoolKind.RECEIVE).buffersInUse() == server.sharedQueueUse()[1], 5_000),
                () -> "buffers posted to the shared queue as counted " + server.sharedQueueUse()[1] + ", receive buffers in use "
                        + server.allocator().stats().pool(PoolKind.RECEIVE).buffersInUse() + "\n" + server.describeLinks());
        long[] use = server.sharedQueueUse();
        assertTrue(use[2] <= use[1], "granted " + use[2] + ", posted " + use[1]);
    }
}
