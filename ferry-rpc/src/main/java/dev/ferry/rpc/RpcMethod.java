package dev.ferry.rpc;

/**
 * A method both sides agree on: its id, whether running it twice is harmless, and whether
 * its handler may run on the transport's progress thread.
 *
 * <p>Declare methods once, as constants shared by client and server code:
 * <pre>{@code
 * static final RpcMethod PULL = RpcMethod.idempotent(1);
 * static final RpcMethod PUSH = RpcMethod.atMostOnce(2);
 * }</pre>
 *
 * @param id the method number on the wire
 * @param idempotent true if the server may run one call more than once: the client then
 *     resends it freely after failures, and the server keeps no deduplication entry for it.
 *     False: the server runs each (client id, call id) at most once and replays its stored
 *     response to retries
 * @param nonBlocking true if the handler is short and never blocks: the server runs it inline
 *     on the transport's progress thread, saving a thread hand-off
 */
public record RpcMethod(int id, boolean idempotent, boolean nonBlocking) {

    /** A method that may run more than once per call. */
    public static RpcMethod idempotent(int id) {
        return new RpcMethod(id, true, false);
    }

    /** A method that runs at most once per call, whatever the retries. */
    public static RpcMethod atMostOnce(int id) {
        return new RpcMethod(id, false, false);
    }

    /** This method, run inline on the progress thread (its handler must not block). */
    public RpcMethod inline() {
        return new RpcMethod(id, idempotent, true);
    }
}
