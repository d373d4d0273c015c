package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportException;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;

/**
 * Fuzzes the control-channel handshake as {@link HandshakeDescriptor} reads it, from either
 * side. Bit 0 of the first byte picks the side: 0, the acceptor reading a dialer (greeting,
 * proof, hello, and the doorbell its hello names); 1, the dialer reading an acceptor (status of
 * the challenge, nonce, proof, answer to a hello of 1 to 4 links, from bits 1-2). Bad input ends
 * in an {@link IOException}, or on the dialer's side in the {@link TransportException} it
 * surfaces for a refusal or a wrong answer; anything else is a defect.
 */
class HandshakeFuzzTest {

    static final int MAX_LINKS = 4;

    @FuzzTest
    void handshake(byte[] data) {
        if (data.length == 0) {
            return;
        }
        boolean dialer = (data[0] & 1) == 1;
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(data, 1, data.length - 1));
        try {
            if (dialer) {
                dialer(in, 1 + ((data[0] >> 1) & 3));
            } else {
                acceptor(in);
            }
        } catch (IOException expected) {
            assertTrue(expected.getMessage() == null || !expected.getMessage().isEmpty());
        } catch (TransportException refused) {
            assertTrue(dialer, () -> "only the dialer's side surfaces refusals: " + refused);
        }
    }

    private static void acceptor(DataInputStream in) throws IOException {
        HandshakeDescriptor.Greeting greeting = HandshakeDescriptor.readGreeting(in);
        assertEquals(SharedSecret.NONCE_BYTES, greeting.nonce().length);
        HandshakeDescriptor.readBytes(in);
        HandshakeDescriptor.Hello hello = HandshakeDescriptor.readHello(in, MAX_LINKS);
        assertTrue(hello.links() >= 1 && hello.links() <= MAX_LINKS);
        check(hello);
    }

    private static void dialer(DataInputStream in, int links) throws IOException {
        HandshakeDescriptor.readStatus("peer:1", in, true);
        assertEquals(SharedSecret.NONCE_BYTES, HandshakeDescriptor.readNonce(in).length);
        HandshakeDescriptor.readBytes(in);
        HandshakeDescriptor.Hello answer = HandshakeDescriptor.readAnswer("peer:1", in, links);
        assertEquals(links, answer.links());
        check(answer);
    }

    private static void check(HandshakeDescriptor.Hello hello) {
        assertEquals(hello.links(), hello.grants().length);
        assertEquals(hello.links(), hello.tokens().length);
        assertTrue(hello.eagerThreshold() >= 0);
        assertTrue(hello.fabricAddress().length <= 0xffff);
        // The peer names a file to map: only an existing doorbell of this host may come of it.
        String path = hello.doorbellPath();
        try (Doorbell.Remote remote = path.isEmpty() ? null : Doorbell.open(path)) {
            assertTrue(remote == null || path.startsWith("/dev/shm/ferry-doorbell-"), () -> "mapped " + path);
        }
        // ... and a process's file to open: only a live process's probe of that exact name passes.
        PeerMemory memory = PeerMemory.probe("peer:1", hello.pid(), hello.probeFd(), hello.sharedPrefix());
        assertTrue(memory == null || hello.sharedPrefix().startsWith("ferry-"), () -> "probed " + hello.sharedPrefix());
    }
}
