package dev.ferry.transport.fabric;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Socket;
import java.security.SecureRandom;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.admission.HandshakeGate;

/**
 * Both sides of the control channel's challenge ({@link HandshakeDescriptor}): each side sends a
 * nonce and proves it holds the shared secret with an HMAC over both nonces, the acceptor first;
 * a side that cannot is refused before it learns anything of this side's fabric. Without a
 * secret on either side the exchange still runs, with empty proofs. Runs on the dialing thread
 * and on the acceptor's handshake threads; its only state is the count of refusals.
 */
final class HandshakeAuthenticator {

    private static final SecureRandom NONCES = new SecureRandom();

    private final TransportConfig config;
    private final HandshakeGate gate;
    private final LongAdder authenticationFailures = new LongAdder();

    HandshakeAuthenticator(TransportConfig config, HandshakeGate gate) {
        this.config = config;
        this.gate = gate;
    }

    /** Connections refused at the challenge (counted only where this side has a secret). */
    long failures() {
        return authenticationFailures.sum();
    }

    /**
     * Dialing side of the challenge: sends a nonce, checks the acceptor's proof of the shared
     * secret, answers with its own. Nothing about this side's fabric is said before it passes.
     */
    void toAcceptor(String address, DataInputStream in, DataOutputStream out) throws IOException {
        SharedSecret secret = config.secret();
        byte[] nonce = nonce();
        HandshakeDescriptor.writeGreeting(out, secret != null, nonce);
        HandshakeDescriptor.readStatus(address, in, true);
        byte[] theirNonce = HandshakeDescriptor.readNonce(in);
        byte[] theirProof = HandshakeDescriptor.readBytes(in);
        byte[] proof = new byte[0];
        if (secret != null) {
            if (!secret.verify(theirProof, HandshakeDescriptor.SERVER_LABEL, nonce, theirNonce, 0)) {
                throw new UnauthenticatedException(address + " failed authentication: it does not hold the shared secret");
            }
            proof = secret.proof(HandshakeDescriptor.CLIENT_LABEL, theirNonce, nonce, 0);
        }
        HandshakeDescriptor.writeBytes(out, proof);
    }

    /**
     * Accepting side of the challenge; false (refused, logged, the socket to be closed) unless
     * the dialer proves it holds this side's secret, or neither side has one.
     */
    boolean dialer(Socket socket, DataInputStream in, DataOutputStream out) throws IOException {
        HandshakeDescriptor.Greeting greeting = HandshakeDescriptor.readGreeting(in);
        SharedSecret secret = config.secret();
        boolean theirs = greeting.hasSecret();
        byte[] theirNonce = greeting.nonce();
        if (theirs != (secret != null)) {
            return refuse(socket, out, secret != null ? "this side requires the shared secret"
                    : "this side has no shared secret");
        }
        byte[] nonce = nonce();
        HandshakeDescriptor.writeChallenge(out, nonce,
                secret == null ? new byte[0] : secret.proof(HandshakeDescriptor.SERVER_LABEL, theirNonce, nonce, 0));
        byte[] proof;
        try {
            proof = HandshakeDescriptor.readBytes(in, SharedSecret.PROOF_BYTES);
        } catch (IOException e) {
            return refuse(socket, null, "no proof of the shared secret: " + HandshakeGate.reasonOf(e));
        }
        if (secret != null && !secret.verify(proof, HandshakeDescriptor.CLIENT_LABEL, nonce, theirNonce, 0)) {
            return refuse(socket, out, "authentication failed");
        }
        return true;
    }

    private boolean refuse(Socket socket, DataOutputStream out, String reason) {
        if (config.secret() != null) {
            authenticationFailures.increment();
        }
        gate.dropLog().drop("refused", socket.getRemoteSocketAddress() + ": " + reason);
        if (out != null) {
            try {
                HandshakeDescriptor.writeRefusal(out, reason);
            } catch (IOException e) {
                // it is gone already
            }
        }
        return false;
    }

    private static byte[] nonce() {
        byte[] nonce = new byte[SharedSecret.NONCE_BYTES];
        NONCES.nextBytes(nonce);
        return nonce;
    }
}
