package dev.ferry.rpc.events;

import java.util.concurrent.TimeUnit;

import dev.ferry.transport.events.EventGate;

/**
 * Emits the RPC layer's flight-recorder events. Each method first compares against the
 * threshold or asks whether the event type is enabled, so a call that is fast, or a recording
 * that is off, costs a branch and allocates nothing.
 *
 * <p>The slow-call threshold is the system property {@code ferry.rpc.slowCallMillis} (default
 * 50 ms): only calls and handler runs at least that long are candidates, which keeps a busy
 * server's recording small.
 */
public final class RpcEvents {

    /** Calls and handler runs at least this long are recorded, when their event is enabled. */
    public static final long SLOW_CALL_NANOS = TimeUnit.MILLISECONDS.toNanos(
            Long.getLong("ferry.rpc.slowCallMillis", 50));

    private static final EventGate SLOW_CALL = new EventGate(SlowCallEvent.class);
    private static final EventGate SLOW_HANDLER = new EventGate(SlowHandlerEvent.class);
    private static final EventGate BREAKER_OPENED = new EventGate(BreakerOpenedEvent.class);
    private static final EventGate BREAKER_CLOSED = new EventGate(BreakerClosedEvent.class);

    private RpcEvents() {
    }

    /** A client call completed after {@code nanos}. */
    public static void callCompleted(int method, String server, long callId, long nanos, boolean ok) {
        if (nanos < SLOW_CALL_NANOS || !SLOW_CALL.enabled()) {
            return;
        }
        SlowCallEvent e = new SlowCallEvent();
        e.method = method;
        e.server = server;
        e.callId = callId;
        e.latency = nanos;
        e.ok = ok;
        e.commit();
    }

    /** A server handler ran for {@code nanos}. */
    public static void handled(int method, long callId, long nanos, boolean ok) {
        if (nanos < SLOW_CALL_NANOS || !SLOW_HANDLER.enabled()) {
            return;
        }
        SlowHandlerEvent e = new SlowHandlerEvent();
        e.method = method;
        e.callId = callId;
        e.latency = nanos;
        e.ok = ok;
        e.commit();
    }

    /** A server's traffic moved to the fallback transport. */
    public static void breakerOpened(String server, int failures, long windowNanos) {
        if (!BREAKER_OPENED.enabled()) {
            return;
        }
        BreakerOpenedEvent e = new BreakerOpenedEvent();
        e.server = server;
        e.failures = failures;
        e.window = windowNanos;
        e.commit();
    }

    /** A server's traffic moved back to the fabric after {@code openNanos} on the fallback. */
    public static void breakerClosed(String server, long openNanos) {
        if (!BREAKER_CLOSED.enabled()) {
            return;
        }
        BreakerClosedEvent e = new BreakerClosedEvent();
        e.server = server;
        e.openFor = openNanos;
        e.commit();
    }
}
