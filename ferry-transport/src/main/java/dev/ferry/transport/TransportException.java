package dev.ferry.transport;

/** A transport failure: a peer unreachable or failed, a link broken, bad input. */
public class TransportException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** A failure described by {@code message}. */
    public TransportException(String message) {
        super(message);
    }

    /** A failure described by {@code message}, caused by {@code cause}. */
    public TransportException(String message, Throwable cause) {
        super(message, cause);
    }
}
