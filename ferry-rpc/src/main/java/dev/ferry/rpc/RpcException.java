package dev.ferry.rpc;

/**
 * A call failed. Subclasses say how: {@link RpcTimeoutException} (deadline),
 * {@link PeerUnavailableException} (the server could not be reached), {@link RemoteException}
 * (the handler threw), {@link AuthenticationException} (a peer was refused).
 */
public class RpcException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** A failure described by {@code message}. */
    public RpcException(String message) {
        super(message);
    }

    /** A failure described by {@code message}, caused by {@code cause}. */
    public RpcException(String message, Throwable cause) {
        super(message, cause);
    }
}
