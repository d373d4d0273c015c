package dev.ferry.transport;

/**
 * Receives inbound messages on the transport's progress thread. It must not block for long;
 * it may keep {@code message} and release it later from any thread.
 */
@FunctionalInterface
public interface MessageHandler {

    /** Called once per message, in order per stream of each peer. */
    void onMessage(Peer from, InboundMessage message);

    /** Called when a peer fails or closes; its pending sends have failed. */
    default void onPeerClosed(Peer peer, Throwable cause) {
    }
}
