package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.memory.AllocatorConfig;
import dev.ferry.memory.MemoryRegistrar;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Messages by reference between processes of one host ({@link TransportConfig#sharedSendBytes}):
 * the receiver reads each in the sender's shared slab, in the stream's order with the eager
 * messages around it; the send settles when the message is delivered, while its buffer stays the
 * receiver's until it releases the message; a receiver holding messages holds credits, not the
 * sender's pool without bound. A message held when its sender goes stays readable until released,
 * and a view used after that throws instead of reading unmapped memory. What a peer names outside
 * its slabs is refused.
 */
@Timeout(60)
class SharedSendTest extends FabricTransportFixture {

    private static final long THRESHOLD = 1024;

    private static TransportConfig config(String provider) {
        return TransportConfig.defaults(provider).withPools(32L << 20, 64L << 20, 32L << 20).withSharedSendBytes(THRESHOLD);
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void largeMessagesGoByReferenceInOrderAndTheirBuffersComeBackOnRelease(String provider) throws Exception {
        TransportConfig config = config(provider);
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        Transport receiver = open(config, (from, m) -> held.add(m));
        Transport sender = open(config, (from, m) -> m.release());
        FabricTransport fabric = (FabricTransport) sender;
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendPoolBuffers(sender);
        int[] sizes = {64, 4096, 100, 40 << 10, 200 << 10, 512, 1023, 1024, 3 * config.eagerThreshold()};
        int expectedShared = 0;
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        for (int i = 0; i < sizes.length; i++) {
            sends.add(sendSeq(peer, i, sizes[i]));
            expectedShared += sizes[i] >= THRESHOLD ? 1 : 0;
        }
        // Delivered (settled) while the receiver still holds every message.
        for (CompletableFuture<Void> send : sends) {
            send.get(10, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> held.size() == sizes.length, 10_000), "arrived " + held.size());
        assertEquals(expectedShared, fabric.counters.sharedSent.sum(), "messages sent by reference");
        for (int i = 0; i < sizes.length; i++) {
            MemorySegment body = held.get(i).segment();
            assertEquals(sizes[i], body.byteSize(), "length of message " + i);
            assertEquals(i, body.get(ValueLayout.JAVA_LONG_UNALIGNED, 0), "order");
            assertNull(check(body, 0, i));
        }
        assertEquals(buffersBefore + expectedShared, sendPoolBuffers(sender),
                "a message by reference keeps its sender's buffer while the receiver holds it");
        assertEquals(0, sender.counters().bytesInFlight(), "the window came back at delivery");
        for (InboundMessage m : held) {
            m.release();
        }
        assertTrue(waitFor(() -> sendPoolBuffers(sender) == buffersBefore, 10_000),
                "send buffers after the releases: " + sendPoolBuffers(sender) + ", before " + buffersBefore);
        assertEquals(0, receiver.counters().receiveBuffersHeld());
        assertTrue(peer.isOpen());
    }

    /**
     * A receiver that only receives (no eager frame of its own for releases to ride) gives many
     * peers their buffers back in batches: every message arrives, no link fails for want of
     * control buffers, and the releases take a frame per 32 messages, not one each.
     */
    @Test
    void releasesToPeersThatHearNothingElseGoInBatches() throws Exception {
        TransportConfig config = config("shm");
        int senders = 6;
        int messages = 700;
        java.util.concurrent.atomic.AtomicInteger arrived = new java.util.concurrent.atomic.AtomicInteger();
        Transport receiver = open(config, (from, m) -> {
            arrived.incrementAndGet();
            m.release();
        });
        List<Transport> sending = new ArrayList<>();
        List<CompletableFuture<Void>> sends = new CopyOnWriteArrayList<>();
        List<Thread> threads = new ArrayList<>();
        List<Long> before = new ArrayList<>();
        for (int s = 0; s < senders; s++) {
            Transport sender = open(config, (from, m) -> m.release());
            sending.add(sender);
            Peer peer = sender.connect(receiver.localAddress());
            before.add(sendPoolBuffers(sender));
            threads.add(Thread.ofPlatform().start(() -> {
                for (int i = 0; i < messages; i++) {
                    sends.add(sendSeq(peer, i, 2048));
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        for (CompletableFuture<Void> send : sends) {
            send.get(30, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> arrived.get() == senders * messages, 30_000), "arrived " + arrived.get());
        assertEquals(0, receiver.counters().linkFailures(), "a link failed");
        for (int s = 0; s < senders; s++) {
            Transport sender = sending.get(s);
            long was = before.get(s);
            assertTrue(waitFor(() -> sendPoolBuffers(sender) == was && sender.counters().bytesInFlight() == 0, 10_000),
                    "a sender's buffers did not come back: " + sendPoolBuffers(sender) + ", before " + was);
        }
        long frames = ((FabricTransport) receiver).counters.releaseFramesSent.sum();
        assertTrue(frames >= 1 && frames <= senders * messages / 16, "release frames: " + frames);
    }

    @Test
    void aReceiverHoldingMessagesByReferenceStallsItsSenderOnCreditsNotOnItsPool() throws Exception {
        TransportConfig config = config("shm").withFlowControl(16 << 10, 8, 4L << 20, 8L << 20, 64L << 20);
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        Transport receiver = open(config, (from, m) -> held.add(m));
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendPoolBuffers(sender);
        List<CompletableFuture<Void>> sends = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            sends.add(sendSeq(peer, i, 8 << 10));
        }
        Thread.sleep(500);
        int arrived = held.size();
        assertTrue(arrived <= 8, "held " + arrived + " messages on 8 credits");
        assertTrue(sender.counters().creditStalls() > 0, "the sender waited for credits");
        long inUse = sendPoolBuffers(sender) - buffersBefore;
        assertTrue(inUse <= 40, "buffers in use " + inUse);
        // Releasing lets the rest through, in order, and every buffer comes back.
        int next = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (next < 40 && System.nanoTime() < deadline) {
            if (next < held.size()) {
                InboundMessage m = held.get(next);
                assertEquals(next, m.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0), "order");
                assertNull(check(m.segment(), 0, next));
                m.release();
                next++;
            } else {
                Thread.sleep(1);
            }
        }
        assertEquals(40, next, "delivered after the releases");
        for (CompletableFuture<Void> send : sends) {
            send.get(10, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> sendPoolBuffers(sender) == buffersBefore, 10_000), "send buffers left: " + sendPoolBuffers(sender));
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void aHeldMessageOutlivesItsSenderAndAViewUsedAfterItsReleaseThrows(String provider) throws Exception {
        TransportConfig config = config(provider);
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        AtomicReference<Throwable> closed = new AtomicReference<>();
        Transport receiver = holdingReceiver(config, held, (peer, cause) -> closed.set(cause));
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        sendSeq(peer, 7, 64 << 10).get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> held.size() == 1, 10_000));
        MemorySegment view = held.get(0).segment();

        sender.close(); // its slabs are unmapped and their descriptors closed
        assertTrue(waitFor(() -> closed.get() != null, 10_000), "the receiver heard of the sender's end");
        assertNull(check(view, 0, 7), "the held message still reads as sent");
        assertEquals(7, view.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));

        held.get(0).release();
        assertThrows(IllegalStateException.class, () -> held.get(0).segment());
        // The release may be handed to the progress thread: the slab goes when it takes it.
        assertTrue(waitFor(() -> unmapped(view), 10_000),
                "the slab of a gone peer is unmapped with its last message; the view must not read it");
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0));
        assertEquals(0, receiver.counters().receiveBuffersHeld());
    }

    /**
     * Releases owed to a sender that went are dropped, whether they were owed before it went
     * (waiting for a frame to ride) or made after: nothing is sent on its dead link, every receive
     * buffer and control buffer comes back, and the next sender's releases still reach it in
     * batches.
     */
    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void releasesOwedToASenderThatWentAreDroppedAndTheNextSenderGetsItsOwn(String provider) throws Exception {
        TransportConfig config = config(provider);
        int messages = config.receiveBuffersPerLink() / 2; // held at once: within the link's credits
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        List<Peer> closed = new CopyOnWriteArrayList<>();
        Transport receiver = holdingReceiver(config, held, (peer, cause) -> closed.add(peer));
        FabricTransport fabric = (FabricTransport) receiver;
        long receiverSendBuffers = sendPoolBuffers(receiver);
        Transport first = open(config, (from, m) -> m.release());
        Peer toReceiver = first.connect(receiver.localAddress());
        for (int i = 0; i < messages; i++) {
            sendSeq(toReceiver, i, 16 << 10).get(10, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> held.size() == messages, 10_000), "arrived " + held.size());
        List<MemorySegment> views = new ArrayList<>();
        for (InboundMessage m : held) {
            views.add(m.segment());
        }
        for (int i = 0; i < messages / 2; i++) {
            held.get(i).release(); // owed, waiting for a frame to ride or the credit review
        }
        first.close();
        assertTrue(waitFor(() -> closed.size() == 1, 10_000), "the receiver heard of the sender's end");
        for (int i = messages / 2; i < messages; i++) {
            assertNull(check(views.get(i), 0, i), "message " + i + " reads as sent while held");
            held.get(i).release();
        }
        assertTrue(waitFor(() -> receiver.counters().receiveBuffersHeld() == 0, 10_000),
                "receive buffers held: " + receiver.counters().receiveBuffersHeld());
        assertTrue(waitFor(() -> views.stream().allMatch(SharedSendTest::unmapped), 10_000),
                "the gone sender's slabs are unmapped with its last message");
        assertTrue(waitFor(() -> sendPoolBuffers(receiver) == receiverSendBuffers, 10_000),
                "the receiver's control buffers: " + sendPoolBuffers(receiver) + " in use, " + receiverSendBuffers + " before");

        held.clear();
        long releasesBefore = fabric.counters.releaseFramesSent.sum();
        Transport second = open(config, (from, m) -> m.release());
        Peer again = second.connect(receiver.localAddress());
        long secondBuffers = sendPoolBuffers(second);
        int rounds = 5;
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < messages; i++) {
                sendSeq(again, r * messages + i, 16 << 10).get(10, TimeUnit.SECONDS);
            }
            assertTrue(waitFor(() -> held.size() == messages, 10_000), "arrived " + held.size());
            for (int i = 0; i < messages; i++) {
                assertNull(check(held.get(i).segment(), 0, r * messages + i), "message " + i + " of round " + r);
                held.get(i).release();
            }
            held.clear();
        }
        assertTrue(waitFor(() -> sendPoolBuffers(second) == secondBuffers, 10_000),
                "the next sender's buffers after the releases: " + sendPoolBuffers(second) + ", " + secondBuffers + " before");
        long frames = fabric.counters.releaseFramesSent.sum() - releasesBefore;
        // In batches: 32 to a frame, and what is owed at the 10 ms credit review (a slow machine
        // sees more reviews; none could make it a frame per release).
        assertTrue(frames >= 1 && frames <= rounds * messages / 4, "RELEASES frames for " + rounds * messages
                + " releases: " + frames);
        assertTrue(again.isOpen());
        assertEquals(1, closed.size(), "only the sender that went was closed");
    }

    @Test
    void aSendWhoseReceiverWentKeepsItsBufferOutOfUseForAWhile() throws Exception {
        TransportConfig config = config("shm");
        List<InboundMessage> held = new CopyOnWriteArrayList<>();
        Transport receiver = open(config, (from, m) -> held.add(m));
        Transport sender = open(config, (from, m) -> m.release());
        Peer peer = sender.connect(receiver.localAddress());
        long buffersBefore = sendPoolBuffers(sender);
        sendSeq(peer, 1, 32 << 10).get(10, TimeUnit.SECONDS);
        assertTrue(waitFor(() -> held.size() == 1, 10_000));
        receiver.close();
        assertTrue(waitFor(() -> !peer.isOpen(), 10_000), "the sender saw its peer go");
        // The receiver (another process, in general) may still read the message: the buffer is
        // not handed out again before the grace ends (AwaitedReleases.LENT_GRACE_NANOS).
        Thread.sleep(200);
        assertEquals(buffersBefore + 1, sendPoolBuffers(sender), "the lent buffer is kept");
    }

    @Test
    void peerMemoryRefusesWhatThePeerDoesNotHave() throws Exception {
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE,
                AllocatorConfig.defaults().withMaxClassBytes(64 << 10).withSlabBytes(1L << 20).withSharedSendPool(true))) {
            assertTrue(allocator.sharesSendPool());
            long pid = ProcessHandle.current().pid();
            PeerMemory memory = PeerMemory.probe("self", pid, allocator.sharedProbeFd(), allocator.sharedPrefix());
            assertNotNull(memory, "this process may open its own probe");
            assertNull(PeerMemory.probe("self", pid, allocator.sharedProbeFd(), allocator.sharedPrefix() + "0"),
                    "another prefix is not this allocator's");
            assertNull(PeerMemory.probe("self", pid, allocator.sharedProbeFd(), ""), "no prefix: nothing shared");

            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, 4096);
            assertNotNull(buffer);
            try {
                buffer.segment().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 0x5eed_1234_5678L);
                int slab = buffer.slabIndex();
                int fd = buffer.sharedFd();
                long offset = buffer.slabOffset();
                PeerMemory.Slab acquired = memory.acquire(slab, fd, offset, 4096);
                assertNotNull(acquired, memory.refusal());
                MemorySegment view = acquired.view(offset, 4096);
                assertEquals(0x5eed_1234_5678L, view.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
                memory.release(acquired);

                assertNull(memory.acquire(slab, fd, (1L << 20) - 100, 200));
                assertTrue(memory.refusal().contains("outside slab"), memory.refusal());
                assertNull(memory.acquire(slab, fd, -8, 16));
                assertNull(memory.acquire(slab, fd, 0, 0));
                assertNull(memory.acquire(slab, fd, Long.MAX_VALUE - 10, 100), "no overflow past the slab");
                assertNull(memory.acquire(-1, fd, 0, 16));
                assertTrue(memory.refusal().contains("out of range"), memory.refusal());
                assertNull(memory.acquire(1 << 30, fd, 0, 16), "an index far past any slab: looked up, not allocated for");
                assertNull(memory.acquire(slab + 1, allocator.sharedProbeFd(), 0, 16),
                        "a descriptor that is not the slab it names");
                assertTrue(memory.refusal().contains("cannot map slab"), memory.refusal());
                assertNull(memory.acquire(slab + 2, 1 << 20, 0, 16), "a descriptor that is not open");
                assertNull(memory.acquire(slab + 3, 0, 0, 16), "standard input: not a memory file, never opened");
                assertTrue(memory.refusal().contains("not /memfd:"), memory.refusal());
                assertEquals(1, memory.mapped());

                // A held view of a gone peer: readable until the grace ends, then it throws.
                PeerMemory.Slab heldSlab = memory.acquire(slab, fd, offset, 64);
                assertNotNull(heldSlab);
                MemorySegment held = heldSlab.view(offset, 64);
                long gone = System.nanoTime();
                memory.close(gone);
                assertEquals(0x5eed_1234_5678L, held.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
                assertFalse(memory.expire(gone + PeerMemory.RETIRED_GRACE_NANOS - 1), "still held, within the grace");
                assertTrue(memory.expire(gone + PeerMemory.RETIRED_GRACE_NANOS), "unmapped at the grace's end");
                assertThrows(IllegalStateException.class, () -> held.get(ValueLayout.JAVA_BYTE, 0));
                memory.release(heldSlab); // the late release finds it unmapped already
            } finally {
                buffer.release();
                memory.closeAll();
            }
            assertFalse(allocator.sharedPrefix().isEmpty());
        }
    }

    /** A receiver that keeps every message in {@code held} and tells {@code closed} of each peer that goes. */
    private Transport holdingReceiver(TransportConfig config, List<InboundMessage> held,
            java.util.function.BiConsumer<Peer, Throwable> closed) {
        return open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                held.add(message);
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                closed.accept(peer, cause);
            }
        });
    }

    private static boolean unmapped(MemorySegment view) {
        try {
            view.get(ValueLayout.JAVA_BYTE, 0);
            return false;
        } catch (IllegalStateException e) {
            return true;
        }
    }


}
