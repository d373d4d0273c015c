package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The client's side of a session's handshake: HELLO with the client's nonce, the server's
 * CHALLENGE (its epoch, nonce and proof of the shared secret), AUTH with the client's proof, and
 * WELCOME with the epoch (or REFUSED). The frames of the server arrive through
 * {@link RpcChannel}'s inbound path, which completes the session's futures.
 */
final class ClientHandshake {

    private static final SecureRandom RANDOM = new SecureRandom();

    private ClientHandshake() {
    }

    /**
     * Connects to {@code address} on the primary or the fallback transport and runs the
     * handshake; blocking, on a virtual thread. The session is registered with the client from
     * the connect on, so the server's answers reach it; the caller abandons it on failure.
     */
    static Session open(RpcChannel channel, RpcClient client, String address, boolean useFallback) throws Exception {
        Transport transport = useFallback ? client.fallback : client.primary;
        Peer peer;
        try {
            peer = transport.connect(address);
        } catch (TransportException e) {
            if (e.reason() == Reason.UNAUTHENTICATED) {
                // The transport's own challenge, before any fabric address: the same verdict as ours.
                throw new AuthenticationException("server " + address + " refused the connection: " + e.getMessage());
            }
            throw e;
        }
        Session s = new Session(channel, peer, useFallback, client.nextHandshake.getAndIncrement());
        client.sessions.put(peer, s);
        long timeout = client.handshakeTimeoutMillis;
        byte[] clientNonce = new byte[SharedSecret.NONCE_BYTES];
        RANDOM.nextBytes(clientNonce);
        sendControl(client, s, RpcDescriptor.HELLO, clientNonce, channel.ackWatermark());
        byte[] challenge = await(s.challenge, timeout, "challenge", address);
        if (challenge.length < SharedSecret.NONCE_BYTES) {
            throw new AuthenticationException("server " + address + " sent a malformed challenge");
        }
        byte[] serverNonce = Arrays.copyOf(challenge, SharedSecret.NONCE_BYTES);
        byte[] proof = Arrays.copyOfRange(challenge, SharedSecret.NONCE_BYTES, challenge.length);
        byte[] answer = new byte[0];
        if (client.secret != null) {
            if (!client.secret.verify(proof, "ferry-server", clientNonce, serverNonce, client.clientId)) {
                throw new AuthenticationException("server " + address + " could not prove it knows the shared secret");
            }
            answer = client.secret.proof("ferry-client", serverNonce, clientNonce, client.clientId);
        }
        sendControl(client, s, RpcDescriptor.AUTH, answer, channel.ackWatermark());
        long epoch = await(s.welcome, timeout, "welcome", address);
        if (epoch != s.epoch) {
            throw new RpcException("server " + address + " changed epoch during the handshake");
        }
        s.lastHeardNanos = System.nanoTime();
        s.ready = true;
        if (s.dead()) {
            throw new RpcException("session to " + address + " failed during the handshake");
        }
        client.sessionsOpened.increment();
        return s;
    }

    private static <T> T await(CompletableFuture<T> future, long timeoutMillis, String what, String address)
            throws Exception {
        try {
            return future.get(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception x ? x : e;
        } catch (TimeoutException e) {
            throw new RpcException("no " + what + " from " + address + " within " + timeoutMillis + " ms", e);
        }
    }

    private static void sendControl(RpcClient client, Session s, byte type, byte[] body, long ackWatermark) {
        OutboundMessage message = s.peer.allocate(RpcDescriptor.HEADER + body.length);
        RpcDescriptor.write(message.segment(), type, (byte) 0, 0, client.clientId, s.handshake, 0, ackWatermark);
        MemorySegment.copy(body, 0, message.segment(), ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
        s.peer.sendAndForget(RpcClient.CONTROL_STREAM, message);
    }
}
