package dev.ferry.rpc;

/**
 * The server stayed unreachable until the call's deadline, or it restarted while a
 * non-idempotent call was in flight (so the call may have run once, and is not run again).
 */
public class PeerUnavailableException extends RpcException {

    private static final long serialVersionUID = 1L;

    private final String peer;

    /** {@code peer} is unavailable for {@code reason}, caused by {@code cause} (may be null). */
    public PeerUnavailableException(String peer, String reason, Throwable cause) {
        super("peer " + peer + " unavailable: " + reason + (cause == null ? "" : " (cause: " + cause.getMessage() + ")"),
                cause);
        this.peer = peer;
    }

    public String peer() {
        return peer;
    }
}
