package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Malformed frames close the link they came on, with a logged reason, and leave the process and
 * other peers alone. Where links share a receive queue and the provider does not say who sent a
 * frame (tcp's shared receive context), a frame that names no link is dropped instead: nothing
 * says whose it was. The frames are injected on a real link of a real transport.
 */
@Timeout(60)
class BadFrameTest {

    @ParameterizedTest(name = "{0}: {1}")
    @CsvSource({
        "shm, unknown-type", "shm, truncated-header", "shm, eager-length-beyond-limit",
        "shm, rendezvous-beyond-max-message", "shm, wrong-link",
        "tcp, unknown-type", "tcp, truncated-header", "tcp, eager-length-beyond-limit",
        "tcp, rendezvous-beyond-max-message", "tcp, wrong-link", "tcp, rendezvous-with-a-bad-key",
        "shm, yield-unasked", "tcp, yield-unasked",
        "shm, reference-to-unmapped-memory", "tcp, reference-to-unmapped-memory",
        "shm, releases-of-unknown-cookies", "tcp, releases-of-unknown-cookies",
        "shm, eager-releasing-an-unknown-cookie", "tcp, eager-releasing-an-unknown-cookie"})
    void aBadFrameClosesOnlyItsLink(String provider, String fault) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 64L << 20);
        AtomicInteger delivered = new AtomicInteger();
        CountDownLatch goodArrived = new CountDownLatch(1);
        MessageHandler serverHandler = (from, message) -> {
            delivered.incrementAndGet();
            byte first = message.segment().byteSize() > 0 ? message.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0) : 0;
            message.release();
            if (first == 42) {
                goodArrived.countDown();
            }
        };
        CountDownLatch badPeerClosed = new CountDownLatch(1);
        try (Transport server = Transports.open(config, serverHandler);
             Transport bad = Transports.open(config, new MessageHandler() {
                 @Override
                 public void onMessage(Peer from, InboundMessage message) {
                     message.release();
                 }

                 @Override
                 public void onPeerClosed(Peer peer, Throwable cause) {
                     badPeerClosed.countDown();
                 }
             });
             Transport good = Transports.open(config, (from, message) -> message.release())) {
            Peer badPeer = bad.connect(server.localAddress());
            Peer goodPeer = good.connect(server.localAddress());
            int link = ((FabricPeer) badPeer).links[0].remoteId;
            int token = ((FabricPeer) badPeer).links[0].remoteToken;
            ((FabricTransport) bad).injectFrame(badPeer, frame(fault, link, token, config));

            boolean unattributable = (fault.equals("truncated-header") || fault.equals("wrong-link"))
                    && !((FabricTransport) server).knowsSenders();
            if (unattributable) {
                assertFalse(badPeerClosed.await(1, TimeUnit.SECONDS), "a link was closed for a frame of no link");
                assertEquals(0, server.counters().linkFailures());
                assertEquals(0, delivered.get(), "a bad frame reached the application");
                assertTrue(badPeer.isOpen());
            } else {
                assertTrue(badPeerClosed.await(20, TimeUnit.SECONDS), "the server did not close the bad link");
                // A bad key is caught by whichever side sees it first: the target's provider refuses
                // the read and drops the connection, or the puller's read fails. Every other fault is
                // the receiving transport's to catch.
                boolean eitherSide = fault.equals("rendezvous-with-a-bad-key");
                assertTrue(FabricTransportFixture.waitFor(() -> server.counters().linkFailures()
                        + (eitherSide ? bad.counters().linkFailures() : 0) >= 1, 10_000),
                        "link failures: server " + server.counters().linkFailures() + ", sender "
                                + bad.counters().linkFailures());
                assertTrue(server.counters().linkFailures() <= 1);
                assertEquals(0, delivered.get(), "a bad frame reached the application");
                assertFalse(badPeer.isOpen());
            }

            OutboundMessage message = goodPeer.allocate(100);
            message.segment().fill((byte) 42);
            goodPeer.send(3, message).get(10, TimeUnit.SECONDS);
            assertTrue(goodArrived.await(10, TimeUnit.SECONDS), "the other peer was affected");
            assertTrue(goodPeer.isOpen());
            assertEquals(0, server.counters().receiveBuffersHeld());
        }
    }

    /**
     * A frame that names the link but not its token is dropped and counted: not delivered, and
     * not held against the link (a stranger on a shared endpoint must not be able to close it).
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"shm", "tcp"})
    void aFrameWithoutItsLinksTokenIsDroppedAndTheLinkLives(String provider) throws Exception {
        TransportConfig config = TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 64L << 20);
        java.util.List<Byte> delivered = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (Transport server = Transports.open(config, (from, message) -> {
                delivered.add(message.segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
                message.release();
            });
             Transport sender = Transports.open(config, (from, message) -> message.release())) {
            Peer peer = sender.connect(server.localAddress());
            Link link = ((FabricPeer) peer).links[0];
            for (int wrong : new int[] {0, link.remoteToken ^ 1, link.remoteToken ^ 0x8000_0000}) {
                if (wrong == link.remoteToken) {
                    continue;
                }
                byte[] bytes = new byte[FrameDescriptor.HEADER + 1];
                MemorySegment f = MemorySegment.ofArray(bytes);
                FrameDescriptor.header(f, FrameDescriptor.EAGER, 0, link.remoteId, wrong, 1, 1, 0);
                bytes[FrameDescriptor.HEADER] = 13;
                ((FabricTransport) sender).injectFrame(peer, bytes);
            }
            assertTrue(FabricTransportFixture.waitFor(() -> server.counters().authenticationFailures() >= 2, 10_000),
                    "the forged frames were not counted: " + server.counters());
            OutboundMessage message = peer.allocate(1);
            message.segment().fill((byte) 42);
            peer.send(1, message).get(10, TimeUnit.SECONDS);
            assertTrue(FabricTransportFixture.waitFor(() -> delivered.size() >= 1, 10_000));
            Thread.sleep(100);
            assertEquals(java.util.List.of((byte) 42), delivered, "only the real message");
            assertTrue(peer.isOpen());
            assertEquals(0, server.counters().linkFailures());
            assertEquals(0, server.counters().receiveBuffersHeld());
        }
    }

    private static byte[] frame(String fault, int link, int token, TransportConfig config) {
        byte[] bytes = new byte[FrameDescriptor.RNDV_REQ_BYTES];
        MemorySegment f = MemorySegment.ofArray(bytes);
        Function<Byte, byte[]> header = type -> {
            FrameDescriptor.header(f, type, 0, link, token, 1, 0, 0);
            return bytes;
        };
        switch (fault) {
            case "unknown-type" -> {
                FrameDescriptor.header(f, (byte) 99, 0, link, token, 1, 0, 0);
                return java.util.Arrays.copyOf(bytes, FrameDescriptor.HEADER);
            }
            case "truncated-header" -> {
                header.apply(FrameDescriptor.EAGER);
                return java.util.Arrays.copyOf(bytes, 10);
            }
            case "eager-length-beyond-limit" -> {
                FrameDescriptor.header(f, FrameDescriptor.EAGER, 0, link, token, 1, config.eagerThreshold() + 1L, 0);
                return java.util.Arrays.copyOf(bytes, FrameDescriptor.HEADER);
            }
            case "rendezvous-beyond-max-message" -> {
                FrameDescriptor.header(f, FrameDescriptor.RNDV_REQ, 0, link, token, 1, config.maxMessageSize() + 1L, 7);
                FrameDescriptor.rendezvous(f, 4096, 1);
                return bytes;
            }
            case "wrong-link" -> {
                FrameDescriptor.header(f, FrameDescriptor.EAGER, 0, link + 1000, token, 1, 0, 0);
                return java.util.Arrays.copyOf(bytes, FrameDescriptor.HEADER);
            }
            case "rendezvous-with-a-bad-key" -> {
                FrameDescriptor.header(f, FrameDescriptor.RNDV_REQ, 0, link, token, 1, 1 << 20, 7);
                FrameDescriptor.rendezvous(f, 0, 0xdead_beefL);
                return bytes;
            }
            case "yield-unasked" -> {
                // Credits given back that the receiver never asked for: a peer lying about its grant.
                FrameDescriptor.header(f, FrameDescriptor.YIELD, 0, link, token, 0, 0, 3);
                return java.util.Arrays.copyOf(bytes, FrameDescriptor.HEADER);
            }
            case "reference-to-unmapped-memory" -> {
                // A message by reference to a receiver that maps none of the sender's memory
                // (sharing is off in this configuration): nothing to read it from.
                FrameDescriptor.header(f, FrameDescriptor.RNDV_SHARED, 0, link, token, 1, 4096, 7);
                FrameDescriptor.shared(f, 0, 0, 3);
                return bytes;
            }
            case "releases-of-unknown-cookies" -> {
                // Two releases of messages by reference the receiver never sent.
                FrameDescriptor.header(f, FrameDescriptor.RELEASES, 0, link, token, 0, 2, 0);
                FrameDescriptor.released(f, 0, 0x7777);
                FrameDescriptor.released(f, 1, 0x7778);
                return bytes;
            }
            case "eager-releasing-an-unknown-cookie" -> {
                // An eager message whose piggybacked release names nothing the receiver sent.
                FrameDescriptor.header(f, FrameDescriptor.EAGER, 0, link, token, 1, 0, 0x7777);
                return java.util.Arrays.copyOf(bytes, FrameDescriptor.HEADER);
            }
            default -> throw new IllegalArgumentException(fault);
        }
    }
}
