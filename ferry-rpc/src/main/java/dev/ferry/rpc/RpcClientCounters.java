package dev.ferry.rpc;

/**
 * A snapshot of a client's counters, totals since it opened.
 *
 * @param calls calls made
 * @param succeeded calls completed with a response
 * @param remoteErrors calls completed with a {@link RemoteException}
 * @param timeouts calls failed with {@link RpcTimeoutException}
 * @param unavailable calls failed with {@link PeerUnavailableException}
 * @param cancelled calls cancelled by the caller
 * @param resends requests sent again on a new session after a failure
 * @param sessionsOpened sessions established (first connects, reconnects and probes)
 * @param sessionFailures sessions lost (peer closed, send failed, heartbeat silence)
 * @param connectFailures connect or handshake attempts that failed
 * @param fallbackSends requests sent on the fallback transport
 * @param breakerOpened times a server's traffic moved to the fallback transport
 * @param breakerClosed times it moved back to the fabric
 */
public record RpcClientCounters(
        long calls,
        long succeeded,
        long remoteErrors,
        long timeouts,
        long unavailable,
        long cancelled,
        long resends,
        long sessionsOpened,
        long sessionFailures,
        long connectFailures,
        long fallbackSends,
        long breakerOpened,
        long breakerClosed) {
}
