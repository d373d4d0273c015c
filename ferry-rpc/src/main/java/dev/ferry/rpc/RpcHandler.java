package dev.ferry.rpc;

/**
 * Serves one method. It reads the request from {@link ServerCall#request()} (a view of the
 * receive buffer) and encodes the response into {@link ServerCall#reply(int)} (a send buffer);
 * returning sends it. A handler that throws answers the caller with a {@link RemoteException}
 * carrying the exception's class and message.
 */
@FunctionalInterface
public interface RpcHandler {

    /** Serves {@code call}; the request view is valid only until this returns. */
    void handle(ServerCall call) throws Exception;
}
