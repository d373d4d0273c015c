package dev.ferry.rpc;

/** The server ran the handler and it threw, or refused the call; the remote class and message come back. */
public class RemoteException extends RpcException {

    private static final long serialVersionUID = 1L;

    private final int method;
    private final int status;
    private final String remoteClass;
    private final String remoteMessage;

    /** An error of {@code status} (see {@link RpcDescriptor}) for a call of {@code method}. */
    public RemoteException(int method, String peer, int status, String remoteClass, String remoteMessage) {
        super("method " + method + " on " + peer + " failed: " + remoteClass
                + (remoteMessage == null || remoteMessage.isEmpty() ? "" : ": " + remoteMessage));
        this.method = method;
        this.status = status;
        this.remoteClass = remoteClass;
        this.remoteMessage = remoteMessage;
    }

    public int method() {
        return method;
    }

    /** One of the {@code STATUS_*} codes of {@link RpcDescriptor}. */
    public int status() {
        return status;
    }

    /** The class name of the exception the handler threw (or a name for the server's refusal). */
    public String remoteClass() {
        return remoteClass;
    }

    public String remoteMessage() {
        return remoteMessage;
    }
}
