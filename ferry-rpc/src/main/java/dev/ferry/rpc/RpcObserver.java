package dev.ferry.rpc;

/**
 * Watches calls as they complete, for latency metrics: set with {@link RpcClient#observe} and
 * {@link RpcServer#observe}. Called on the thread that completes the call (a transport's
 * progress thread, a handler thread, the timer), so an implementation must be short, must not
 * block, must not allocate and must not take a lock; counting into pre-made histograms is the
 * intended use.
 */
public interface RpcObserver {

    /** Observes nothing. */
    RpcObserver NONE = new RpcObserver() {
    };

    /**
     * A client call completed.
     *
     * @param method the method called
     * @param nanos  from the call to its completion
     * @param ok     true if it completed with a response, false if it failed (timeout, unavailable,
     *               remote error, cancelled)
     */
    default void callCompleted(RpcMethod method, long nanos, boolean ok) {
    }

    /**
     * A server handler returned or threw.
     *
     * @param method the method handled
     * @param nanos  how long the handler ran
     * @param ok     false if it threw
     */
    default void handled(RpcMethod method, long nanos, boolean ok) {
    }
}
