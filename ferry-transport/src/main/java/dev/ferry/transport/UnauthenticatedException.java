package dev.ferry.transport;

/**
 * A connection refused at authentication: the peer could not prove it holds the shared secret,
 * or refused this side's proof (or its lack of one). Nothing about either side's fabric was
 * exchanged. Its {@link #reason()} is {@link Reason#UNAUTHENTICATED}.
 */
public class UnauthenticatedException extends TransportException {

    private static final long serialVersionUID = 1L;

    /** An authentication refusal with its reason. */
    public UnauthenticatedException(String message) {
        super(Reason.UNAUTHENTICATED, message);
    }
}
