package dev.ferry.rpc;

/** The call's deadline passed while the server was reachable but had not answered. */
public class RpcTimeoutException extends RpcException {

    private static final long serialVersionUID = 1L;

    private final int method;
    private final String peer;
    private final long deadlineMillis;

    /** Call of {@code method} to {@code peer} with a deadline of {@code deadlineMillis} ms. */
    public RpcTimeoutException(int method, String peer, long deadlineMillis, String detail) {
        super("call of method " + method + " to " + peer + " exceeded its deadline of " + deadlineMillis + " ms"
                + (detail == null ? "" : ": " + detail));
        this.method = method;
        this.peer = peer;
        this.deadlineMillis = deadlineMillis;
    }

    public int method() {
        return method;
    }

    public String peer() {
        return peer;
    }

    public long deadlineMillis() {
        return deadlineMillis;
    }
}
