package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;

/**
 * The server's side of the session handshake: HELLO, CHALLENGE, AUTH, then WELCOME or REFUSED.
 *
 * <pre>
 *   client                                   server
 *     | HELLO  (client id, client nonce) ------> |  new PeerState (or the same client's again)
 *     | <---- CHALLENGE (server nonce[, proof])  |  proof = secret's MAC over both nonces
 *     | AUTH   (client proof) -----------------> |  verified against this handshake's nonces
 *     | <---------------------- WELCOME/REFUSED  |  authenticated() true only after WELCOME
 * </pre>
 *
 * <p>HELLO and AUTH frames arrive on a transport's progress thread; {@link #authenticated}
 * is asked there and by the handler threads. The state of one peer is guarded by its own
 * monitor; the map of peers is concurrent.
 */
final class ServerSessions {

    /** Sends a control frame to a peer without waiting for a buffer (the server's replay path). */
    @FunctionalInterface
    interface ControlSender {
        void send(Peer to, byte type, long clientId, long callId, byte[] body);
    }

    private static final System.Logger LOG = System.getLogger("dev.ferry.rpc.server");
    private static final SecureRandom RANDOM = new SecureRandom();

    private final SharedSecret secret;
    private final ControlSender control;
    private final ConcurrentHashMap<Peer, PeerState> peers = new ConcurrentHashMap<>();
    private final LongAdder welcomed = new LongAdder();
    private final LongAdder refused = new LongAdder();

    /** What the server knows of one peer: its handshake and whether it proved the secret. */
    private static final class PeerState {
        volatile boolean authenticated;
        volatile long clientId;
        byte[] clientNonce;
        byte[] serverNonce;
        /** The client's number for its latest handshake; frames of older ones are stale. */
        long handshake;
    }

    /** With {@code secret} (null: no secret, any client is welcome) and the way to answer. */
    ServerSessions(SharedSecret secret, ControlSender control) {
        this.secret = secret;
        this.control = control;
    }

    /** Whether {@code peer} completed a handshake that was welcomed. */
    boolean authenticated(Peer peer) {
        PeerState state = peers.get(peer);
        return state != null && state.authenticated;
    }

    /** Forgets {@code peer}: its transport closed it. */
    void closed(Peer peer) {
        peers.remove(peer);
    }

    /** Handshakes welcomed. */
    long welcomed() {
        return welcomed.sum();
    }

    /** Handshakes refused (wrong secret, stale or unknown handshake state). */
    long refused() {
        return refused.sum();
    }

    /** A client opens (or re-opens) its session: answers with a challenge. */
    void onHello(Peer from, MemorySegment frame) {
        long clientId = RpcDescriptor.clientId(frame);
        byte[] clientNonce = RpcDescriptor.body(frame).toArray(ValueLayout.JAVA_BYTE);
        PeerState state = peers.computeIfAbsent(from, p -> new PeerState());
        byte[] serverNonce = new byte[SharedSecret.NONCE_BYTES];
        RANDOM.nextBytes(serverNonce);
        byte[] body;
        synchronized (state) {
            if (state.clientId != clientId) {
                // A new client on this peer: it starts unauthenticated. The same client
                // re-opening its session keeps its standing, so its calls in flight survive.
                state.authenticated = false;
                state.clientId = clientId;
            }
            state.clientNonce = clientNonce;
            state.serverNonce = serverNonce;
            state.handshake = RpcDescriptor.callId(frame);
        }
        if (secret == null) {
            body = serverNonce;
        } else {
            byte[] proof = secret.proof("ferry-server", clientNonce, serverNonce, clientId);
            body = new byte[serverNonce.length + proof.length];
            System.arraycopy(serverNonce, 0, body, 0, serverNonce.length);
            System.arraycopy(proof, 0, body, serverNonce.length, proof.length);
        }
        control.send(from, RpcDescriptor.CHALLENGE, clientId, RpcDescriptor.callId(frame), body);
    }

    /** A client answers its challenge: welcomes it if the proof holds, else refuses it. */
    void onAuth(Peer from, MemorySegment frame) {
        long clientId = RpcDescriptor.clientId(frame);
        PeerState state = peers.get(from);
        byte[] proof = RpcDescriptor.body(frame).toArray(ValueLayout.JAVA_BYTE);
        long handshake = RpcDescriptor.callId(frame);
        boolean ok;
        synchronized (state == null ? this : state) {
            if (state != null && state.handshake != handshake) {
                return; // an answer to a challenge the client has given up on
            }
            ok = state != null && state.clientId == clientId && state.serverNonce != null
                    && (secret == null || secret.verify(proof, "ferry-client", state.serverNonce, state.clientNonce, clientId));
            if (state != null) {
                state.authenticated = ok;
                state.serverNonce = null;
            }
        }
        if (ok) {
            welcomed.increment();
            control.send(from, RpcDescriptor.WELCOME, clientId, handshake, new byte[0]);
        } else {
            refused.increment();
            LOG.log(System.Logger.Level.WARNING, "refused peer " + from.address() + " (client "
                    + Long.toHexString(clientId) + "): authentication failed");
            control.send(from, RpcDescriptor.REFUSED, clientId, handshake,
                    "authentication failed: wrong shared secret".getBytes(StandardCharsets.UTF_8));
        }
    }
}
