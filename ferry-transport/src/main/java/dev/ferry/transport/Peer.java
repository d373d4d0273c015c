package dev.ferry.transport;

import java.util.concurrent.CompletableFuture;

/**
 * A remote transport, reached over one or more links that all of its streams share.
 * Thread-safe: any number of threads may allocate and send to one peer.
 */
public interface Peer {

    /** The peer's {@link Transport#localAddress()}, or its remote socket for an accepted peer. */
    String address();

    /**
     * Takes a send buffer of exactly {@code length} bytes to encode a message into, waiting
     * while the send pool is exhausted.
     *
     * @throws TransportException if no buffer frees up within the connect timeout, the peer
     *     has failed, or {@code length} exceeds {@link TransportConfig#maxMessageSize()}
     */
    OutboundMessage allocate(int length);

    /** Like {@link #allocate} but returns {@code null} at once when the send pool is exhausted. */
    OutboundMessage tryAllocate(int length);

    /**
     * Sends {@code message} on {@code stream} (any int); the peer takes ownership of the buffer.
     * Messages of one stream are delivered in the order of their send calls. The future
     * completes once the transport is finished with the buffer (the receiver has it, or has
     * pulled it), and fails with {@link TransportException} if the peer fails first. Work
     * beyond the send window waits inside the transport: the future completes later.
     */
    CompletableFuture<Void> send(int stream, OutboundMessage message);

    /**
     * Sends like {@link #send}, for a caller that does not wait for the outcome but wants to
     * hear of it: {@code onDone} runs once, with null or the failure (a {@link
     * TransportException} with its reason), on whichever thread completes the send. The
     * transport may report a success late: a fabric transport's idle progress thread does not
     * wake for completions of such sends, it reaps them on its next turn of work or timer. A
     * thread that waits for a send's completion uses {@link #send}.
     */
    default void sendWatched(int stream, OutboundMessage message,
            java.util.function.BiConsumer<? super Void, ? super Throwable> onDone) {
        send(stream, message).whenComplete(onDone);
    }

    /**
     * Sends like {@link #send}, for a caller that does not wait for the outcome: no future is
     * made. A failed send shows only as the peer's failure ({@link MessageHandler#onPeerClosed}).
     */
    default void sendAndForget(int stream, OutboundMessage message) {
        send(stream, message);
    }

    /**
     * Sends only if the send window admits {@code message} now and nothing of {@code stream}
     * waits before it; otherwise returns {@code false} and the caller keeps the buffer.
     */
    boolean trySend(int stream, OutboundMessage message);

    /** False once the peer has failed or the transport is closed. */
    boolean isOpen();

    /**
     * Closes the peer now, as a failure would: its links go down, sends not yet completed fail
     * with {@link TransportException}, and the handlers on both sides see
     * {@link MessageHandler#onPeerClosed} (a remote receiver that has stopped reading, holding all
     * its buffers, may be told only once it reads again). A later {@link Transport#connect} to the
     * same address opens a new peer. Closing twice does nothing.
     */
    void close();
}
