package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.fabric.FabricObject;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * A rendezvous sender advertises a key for exactly one transfer: the payload alone, for reads,
 * closed when the transfer ends however it ends. A sender replaying or stretching its request
 * stands for a receiver that keeps a key or reads past a range: on tcp the target refuses the
 * read and drops the connection, so the puller's read fails and nothing is delivered. libfabric
 * 1.17's shm checks neither keys nor bounds, which the tests pin down.
 */
@Timeout(120)
class RendezvousKeyTest extends FabricTransportFixture {

    private static TransportConfig config(String provider) {
        return TransportConfig.defaults(provider).withPools(64L << 20, 16L << 20, 64L << 20);
    }

    private static byte pattern(int seq, long index) {
        return (byte) (seq * 31 + index * 7 + (index >>> 9));
    }

    private static OutboundMessage filled(Peer peer, int seq, int size) {
        OutboundMessage message = peer.allocate(size);
        MemorySegment segment = message.segment();
        for (int i = 0; i < size; i++) {
            segment.set(ValueLayout.JAVA_BYTE, i, pattern(seq, i));
        }
        segment.set(ValueLayout.JAVA_INT_UNALIGNED, 0, seq);
        return message;
    }

    private static boolean intact(MemorySegment segment) {
        int seq = segment.get(ValueLayout.JAVA_INT_UNALIGNED, 0);
        for (long i = 4; i < segment.byteSize(); i++) {
            if (segment.get(ValueLayout.JAVA_BYTE, i) != pattern(seq, i)) {
                return false;
            }
        }
        return true;
    }

    private static long[] keyCounts(Transport transport) {
        return ((FabricTransport) transport).rendezvousKeyCounts();
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    void theKeyOfAPulledPayloadReadsNothingAfterwards(String provider) throws Exception {
        List<InboundFrame> pulled = new CopyOnWriteArrayList<>();
        List<Boolean> intact = new CopyOnWriteArrayList<>();
        Transport receiver = open(config(provider), (from, message) -> {
            InboundFrame frame = ((ReceivedMessage) message).frame();
            if (!frame.eager) {
                pulled.add(frame);
                intact.add(intact(message.segment()));
            }
            message.release();
        });
        Transport sender = open(config(provider), (from, message) -> message.release());
        Peer peer = sender.connect(receiver.localAddress());
        peer.send(1, filled(peer, 1, 1 << 20)).get(20, TimeUnit.SECONDS);
        assertEquals(List.of(true), intact, "the rendezvous payload");
        assertArrayEquals(new long[] {1, 1}, keyCounts(sender), "keys registered and closed");

        // The sender replays the request it advertised, as a receiver keeping the key would read.
        InboundFrame first = pulled.get(0);
        byte[] replay = new byte[FrameDescriptor.RNDV_REQ_BYTES];
        MemorySegment frame = MemorySegment.ofArray(replay);
        FrameDescriptor.header(frame, FrameDescriptor.RNDV_REQ, 0, ((FabricPeer) peer).links[0].remoteId,
                ((FabricPeer) peer).links[0].remoteToken, 2, first.length, 1L << 40);
        FrameDescriptor.rendezvous(frame, first.remoteAddress, first.remoteKey);
        ((FabricTransport) sender).injectFrame(peer, replay);

        if (provider.equals("shm")) {
            // libfabric 1.17's shm reads the peer's memory by cross-memory attach without looking
            // at the key: the replayed read goes through. Then the sender, which knows no such
            // transfer, closes the link on its release.
            assertTrue(waitFor(() -> pulled.size() == 2, 10_000), "shm now refuses a closed key");
            assertTrue(waitFor(() -> !peer.isOpen(), 10_000), "a release for no transfer was accepted");
            return;
        }
        // The target refuses the read: the puller's read completes with an error, or the target
        // drops the connection first, and the link closes. (Once in about ten runs of the whole
        // suite on a loaded machine the refusal had not surfaced within the wait.) Whatever the
        // timing, nothing may be delivered.
        boolean failed = waitFor(() -> receiver.counters().linkFailures() + sender.counters().linkFailures() >= 1,
                10_000);
        assertEquals(1, pulled.size(), "a read with a closed key delivered a message");
        if (failed) {
            assertTrue(waitFor(() -> !peer.isOpen(), 10_000));
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    void aReadBeyondTheAdvertisedRangeFailsWhileTheTransferIsOpen(String provider) throws Exception {
        final int size = 768 << 10;
        // One link, so frames and reads keep their order; the receiver keeps what it gets and its
        // rendezvous pool holds two payloads, so the third transfer stays advertised, not pulled.
        TransportConfig config = config(provider).withLinks(1, 4096);
        List<InboundMessage> kept = new CopyOnWriteArrayList<>();
        List<Long> lengths = new CopyOnWriteArrayList<>();
        Transport receiver = open(config.withPools(16L << 20, 16L << 20, 2L << 20), (from, message) -> {
            lengths.add(message.segment().byteSize());
            if (message.segment().byteSize() > config.eagerThreshold()) {
                kept.add(message);
                return;
            }
            // The small message that follows the forged request: room for both pulls now, so both
            // reads go out before the third transfer can end. (Released here, on the progress
            // thread, the buffers go back to the cache that the pulls allocate from.)
            message.release();
            kept.forEach(InboundMessage::release);
            kept.clear();
        });
        Transport sender = open(config, (from, message) -> message.release());
        Peer peer = sender.connect(receiver.localAddress());
        peer.send(1, filled(peer, 1, size)).get(20, TimeUnit.SECONDS);
        peer.send(1, filled(peer, 2, size)).get(20, TimeUnit.SECONDS);
        OutboundMessage third = filled(peer, 3, size);
        MemorySegment advertised = ((SendClaim) third).live().buffer.segment();
        peer.send(1, third);
        assertTrue(waitFor(() -> keyCounts(sender)[0] == 3, 10_000), "the third transfer was not advertised");

        // The sender asks for 4 KiB more than it advertised, under the open transfer's key.
        byte[] beyond = new byte[FrameDescriptor.RNDV_REQ_BYTES];
        MemorySegment frame = MemorySegment.ofArray(beyond);
        FrameDescriptor.header(frame, FrameDescriptor.RNDV_REQ, 0, ((FabricPeer) peer).links[0].remoteId,
                ((FabricPeer) peer).links[0].remoteToken, 2, size + 4096, 1L << 40);
        FrameDescriptor.rendezvous(frame, FrameDescriptor.remoteAddress(advertised), FrameDescriptor.remoteKey(advertised));
        ((FabricTransport) sender).injectFrame(peer, beyond);
        peer.send(3, filled(peer, 4, 64));
        assertTrue(waitFor(() -> lengths.contains(64L), 10_000), "the message behind the request never arrived");
        if (provider.equals("shm")) {
            // libfabric 1.17's shm checks no bounds: the read past the payload goes through.
            assertTrue(waitFor(() -> lengths.contains(size + 4096L), 10_000), "shm now refuses a read beyond a range");
            return;
        }
        assertTrue(waitFor(() -> !peer.isOpen(), 10_000), "a read beyond the advertised range did not fail");
        assertFalse(lengths.contains(size + 4096L), "a read beyond the advertised range delivered a message");
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    void hundredsOfRendezvousSendsLeaveNoKeyOpen(String provider) throws Exception {
        final int threads = 4;
        final int perThread = 100;
        long liveBefore = FabricObject.liveObjects();
        AtomicInteger good = new AtomicInteger();
        AtomicInteger bad = new AtomicInteger();
        Transport receiver = open(config(provider), (from, message) -> {
            (intact(message.segment()) ? good : bad).incrementAndGet();
            message.release();
        });
        Transport sender = open(config(provider), (from, message) -> message.release());
        Peer peer = sender.connect(receiver.localAddress());
        List<CompletableFuture<Void>> sends = new CopyOnWriteArrayList<>();
        List<Thread> senders = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            senders.add(Thread.ofPlatform().name("sender-" + t).start(() -> {
                SplittableRandom random = new SplittableRandom(thread);
                for (int i = 0; i < perThread; i++) {
                    int size = random.nextInt(config(provider).eagerThreshold() + 1, 512 << 10);
                    sends.add(peer.send(thread, filled(peer, thread * perThread + i, size)));
                }
            }));
        }
        for (Thread t : senders) {
            t.join();
        }
        for (CompletableFuture<Void> send : sends) {
            send.get(30, TimeUnit.SECONDS);
        }
        assertTrue(waitFor(() -> good.get() == threads * perThread, 10_000), "delivered " + good + " of " + threads * perThread);
        assertEquals(0, bad.get(), "damaged payloads");
        long[] keys = keyCounts(sender);
        assertEquals(threads * perThread, keys[0], "one key per transfer");
        assertEquals(keys[0], keys[1], "keys still open after every transfer completed");

        sender.close();
        receiver.close();
        assertEquals(liveBefore, FabricObject.liveObjects(), "native objects left open");
    }

    @ParameterizedTest
    @ValueSource(strings = {"tcp", "shm"})
    void aPeerClosedMidRendezvousClosesTheKey(String provider) throws Exception {
        long liveBefore = FabricObject.liveObjects();
        // The receiver keeps what it gets, and its rendezvous pool holds one payload: the second
        // waits, advertised and never pulled, until the receiver goes away.
        List<InboundMessage> kept = new CopyOnWriteArrayList<>();
        Transport receiver = open(config(provider).withPools(16L << 20, 16L << 20, 1L << 20),
                (from, message) -> kept.add(message));
        Transport sender = open(config(provider), (from, message) -> message.release());
        Peer peer = sender.connect(receiver.localAddress());
        peer.send(1, filled(peer, 1, 768 << 10)).get(20, TimeUnit.SECONDS);
        CompletableFuture<Void> waiting = peer.send(1, filled(peer, 2, 768 << 10));
        assertTrue(waitFor(() -> keyCounts(sender)[0] == 2, 10_000), "the second transfer was not advertised");
        Thread.sleep(200);
        assertFalse(waiting.isDone(), "the receiver pulled beyond its rendezvous pool");
        assertArrayEquals(new long[] {2, 1}, keyCounts(sender), "the pending transfer's key is open");

        receiver.close();
        ExecutionException failed = assertThrows(ExecutionException.class, () -> waiting.get(20, TimeUnit.SECONDS));
        assertInstanceOf(TransportException.class, failed.getCause());
        assertArrayEquals(new long[] {2, 2}, keyCounts(sender), "the key outlived its peer");
        kept.forEach(InboundMessage::release);

        sender.close();
        assertEquals(liveBefore, FabricObject.liveObjects(), "native objects left open");
    }
}
