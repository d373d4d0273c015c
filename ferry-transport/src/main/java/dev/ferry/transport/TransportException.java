package dev.ferry.transport;

/**
 * A transport failure, with a {@link #reason()} a caller can act on: wait and retry
 * ({@link Reason#POOL_EXHAUSTED}), reconnect or fail over ({@link Reason#PEER_FAILED},
 * {@link Reason#UNREACHABLE}, {@link Reason#TIMEOUT}), stop ({@link Reason#CLOSED},
 * {@link Reason#UNAUTHENTICATED}), or fix the call ({@link Reason#BAD_INPUT},
 * {@link Reason#LIMIT_REACHED}).
 */
public class TransportException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** Why a transport operation failed, and so what the caller may do about it. */
    public enum Reason {
        /** A bounded buffer pool had no room in time: back-pressure; the same call may succeed later. */
        POOL_EXHAUSTED,
        /** The peer failed, went away or broke the protocol, or its link broke: reconnect, or fail over. */
        PEER_FAILED,
        /** No connection could be made: the peer is not listening, refused, or is not a Ferry transport. */
        UNREACHABLE,
        /** The peer did not answer, or the links did not come up, within the configured time. */
        TIMEOUT,
        /** This transport, or the peer, was closed by the application: nothing more goes through it. */
        CLOSED,
        /** A configured limit (links, receive queue entries) allows no more: raise it or use fewer. */
        LIMIT_REACHED,
        /** The call itself is wrong (a message too large, a malformed address, a foreign message): fix it. */
        BAD_INPUT,
        /** Authentication failed: one side could not prove it holds the shared secret. */
        UNAUTHENTICATED,
        /** The fabric provider, address or port is not available in this process. */
        UNAVAILABLE,
        /** The calling thread was interrupted while it waited. */
        INTERRUPTED,
        /** Made without a reason (code outside the transports, or older code); taken from the cause where it has one. */
        UNSPECIFIED
    }

    private final Reason reason;

    /** A failure for {@code reason}, described by {@code message}. */
    public TransportException(Reason reason, String message) {
        super(message);
        this.reason = reason;
    }

    /** A failure for {@code reason}, described by {@code message}, caused by {@code cause}. */
    public TransportException(Reason reason, String message, Throwable cause) {
        super(message, cause);
        this.reason = reason;
    }

    /**
     * A failure described by {@code message}, without a reason of its own.
     * Transports name a reason: {@link #TransportException(Reason, String)}.
     */
    public TransportException(String message) {
        this(Reason.UNSPECIFIED, message);
    }

    /**
     * A failure described by {@code message}, caused by {@code cause}: its reason is the cause's,
     * if the cause is a transport failure.
     * Transports name a reason: {@link #TransportException(Reason, String, Throwable)}.
     */
    public TransportException(String message, Throwable cause) {
        this(reasonOf(cause, Reason.UNSPECIFIED), message, cause);
    }

    /** Why it failed: what the caller may do about it. */
    public Reason reason() {
        return reason;
    }

    /** The reason of {@code cause} if it is a transport failure with one, else {@code otherwise}. */
    public static Reason reasonOf(Throwable cause, Reason otherwise) {
        return cause instanceof TransportException t && t.reason != Reason.UNSPECIFIED ? t.reason : otherwise;
    }
}
