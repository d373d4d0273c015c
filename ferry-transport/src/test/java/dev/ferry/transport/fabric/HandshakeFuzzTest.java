package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportException;
import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.util.Arrays;

/**
 * Fuzzes the control-channel handshake as {@link HandshakeReader} parses it, from either side.
 * The first byte picks the side: even, the acceptor reading a dialer (challenge, proof, hello,
 * abilities, and the doorbell path it names); odd, the dialer reading an acceptor (answer to the
 * challenge, nonce, proof, answer to the hello, abilities). Bad input ends in an
 * {@link IOException} (the dialer's side may also throw the {@link TransportException} it
 * surfaces for a refusal); anything else is a defect.
 */
class HandshakeFuzzTest {

    static final int MAX_LINKS = 4;

    @FuzzTest
    void handshake(byte[] data) {
        if (data.length == 0) {
            return;
        }
        DataInputStream in = new DataInputStream(new ByteArrayInputStream(data, 1, data.length - 1));
        try {
            if ((data[0] & 1) == 0) {
                acceptor(in);
            } else {
                dialer(in);
            }
        } catch (IOException expected) {
            assertTrue(expected.getMessage() == null || !expected.getMessage().isEmpty());
        } catch (TransportException refused) {
            assertTrue((data[0] & 1) == 1, "only the dialer's side surfaces refusals: " + refused);
        }
    }

    private static void acceptor(DataInputStream in) throws IOException {
        HandshakeReader.Challenge challenge = HandshakeReader.readChallenge(in);
        assertEquals(SharedSecret.NONCE_BYTES, challenge.nonce().length);
        byte[] proof = HandshakeReader.readBytes(in);
        assertTrue(proof.length <= 0xffff);
        HandshakeReader.Hello hello = HandshakeReader.readHello(in, MAX_LINKS);
        assertTrue(hello.links() >= 1 && hello.links() <= MAX_LINKS);
        assertEquals(hello.links(), hello.grants().length);
        assertTrue(hello.fabricAddress().length <= 0xffff);
        abilities(in);
    }

    private static void dialer(DataInputStream in) throws IOException {
        HandshakeReader.readAnswer("peer:1", in, true);
        assertEquals(SharedSecret.NONCE_BYTES, HandshakeReader.readNonce(in).length);
        HandshakeReader.readBytes(in);
        HandshakeReader.readAnswer("peer:1", in, false);
        HandshakeReader.readBytes(in);
        int n = in.readInt();
        for (int i = 0; i < Math.min(n, MAX_LINKS) * 2; i++) {
            in.readInt();
        }
        abilities(in);
    }

    private static void abilities(DataInputStream in) throws IOException {
        HandshakeReader.Abilities abilities = HandshakeReader.readAbilities(in);
        assertTrue(abilities.eagerThreshold() >= 0);
        // The peer names a file to map: only an existing doorbell of this host may come of it.
        try (Doorbell.Remote remote = Doorbell.open(abilities.doorbellPath())) {
            assertTrue(remote == null || abilities.doorbellPath().contains("doorbell"),
                    () -> "mapped " + Arrays.toString(abilities.doorbellPath().getBytes()));
        }
    }
}
