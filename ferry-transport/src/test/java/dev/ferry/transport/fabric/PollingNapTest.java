package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;

/**
 * A caller that polls for its replies one after another sends its progress thread into naps that
 * grow to {@link PollingNap#MAX_NANOS}, and every reply still arrives once, intact and in order;
 * once the caller stops polling, a message nobody polls for is still delivered (the long nap
 * ends, and the progress thread goes back to its wait object); and a peer that closes while the
 * caller polls call after call is noticed, a send after it refused with a reason.
 */
@Timeout(120)
class PollingNapTest extends FabricTransportFixture {

    private static final int CALLS = 3_000;
    /**
     * Calls made at most while waiting for the naps to reach their longest: a series breaks when
     * the caller pauses over 1 ms (a slow host, a collection), and 3,000 calls were once not
     * enough for it to reach 1 ms again (it stood at 800 us).
     */
    private static final int MAX_CALLS = 200_000;
    private static final int SIZE = 256;

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp"})
    void napsGrowWhileACallerPollsAndNeitherAMessageNobodyPollsForNorAPeerClosingIsMissed(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider);
        AtomicReference<Peer> caller = new AtomicReference<>();
        // The echo side: each message goes back as it came; the caller's side's address is kept.
        Transport echo = open(config, (from, m) -> {
            caller.set(from);
            OutboundMessage reply = from.allocate((int) m.segment().byteSize());
            reply.segment().copyFrom(m.segment());
            m.release();
            from.sendAndForget(m.stream(), reply);
        });
        AtomicReference<CompletableFuture<Long>> pending = new AtomicReference<>();
        Queue<String> problems = new ConcurrentLinkedQueue<>();
        AtomicLong unsolicited = new AtomicLong(-1);
        CountDownLatch echoClosed = new CountDownLatch(1);
        Transport client = spinning(() -> open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage m) {
                long seq = m.segment().get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, 0);
                String bad = check(m.segment(), m.stream(), seq);
                if (bad != null) {
                    problems.add(bad);
                }
                if (m.stream() == 1) {
                    unsolicited.set(seq);
                } else {
                    CompletableFuture<Long> f = pending.getAndSet(null);
                    if (f == null) {
                        problems.add("reply " + seq + " with no call pending (a duplicate)");
                    } else {
                        f.complete(seq);
                    }
                }
                m.release();
            }

            @Override
            public void onPeerClosed(Peer closed, Throwable cause) {
                echoClosed.countDown();
            }
        }));
        FabricTransport fabric = (FabricTransport) client;
        Peer peer = client.connect(echo.localAddress());

        long seq = 0;
        for (; seq < CALLS || fabric.loop.napCounts()[1] < PollingNap.MAX_NANOS && seq < MAX_CALLS; seq++) {
            assertEquals(seq, call(client, peer, pending, seq).get(10, TimeUnit.SECONDS), "replies in order, each once");
        }
        long[] naps = fabric.loop.napCounts();
        assertTrue(naps[0] > 0, "the progress thread napped while the caller polled");
        assertEquals(PollingNap.MAX_NANOS, naps[1], "naps grew to the longest while the caller kept polling");

        // Nobody polls now: a message from the echo side still arrives.
        OutboundMessage late = caller.get().allocate(SIZE);
        fill(late.segment(), 1, 42);
        caller.get().sendAndForget(1, late);
        assertTrue(waitFor(() -> unsolicited.get() == 42, 10_000), "a message nobody polls for arrives");

        // The naps grow again; then the echo side closes while the caller keeps polling for a
        // reply that cannot come: the caller's side hears of it, and a send after it fails with a reason.
        for (long last = seq + 200; seq < last; seq++) {
            assertEquals(seq, call(client, peer, pending, seq).get(10, TimeUnit.SECONDS), "replies in order, each once");
        }
        echo.close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        for (; echoClosed.getCount() > 0 && System.nanoTime() < deadline; seq++) {
            try {
                call(client, peer, pending, seq);
            } catch (TransportException e) {
                assertNotEquals(TransportException.Reason.UNSPECIFIED, e.reason(), "a send to a closed peer says why");
                break;
            }
        }
        assertTrue(echoClosed.await(10, TimeUnit.SECONDS), "the caller's side hears that its peer closed");
        TransportException refused = assertThrows(TransportException.class, () -> peer.allocate(SIZE));
        assertNotEquals(TransportException.Reason.UNSPECIFIED, refused.reason());
        assertNull(problems.peek(), () -> String.join("; ", problems));
    }

    /** Sends call {@code seq} and polls for its reply up to 10 ms, as {@code RpcChannel.invoke} does; its reply's future. */
    private static CompletableFuture<Long> call(Transport client, Peer peer,
            AtomicReference<CompletableFuture<Long>> pending, long seq) {
        CompletableFuture<Long> reply = new CompletableFuture<>();
        pending.set(reply);
        OutboundMessage message = peer.allocate(SIZE);
        fill(message.segment(), 0, seq);
        peer.sendAndForget(0, message);
        client.awaitPolling(reply, TimeUnit.MILLISECONDS.toNanos(10));
        return reply;
    }
}
