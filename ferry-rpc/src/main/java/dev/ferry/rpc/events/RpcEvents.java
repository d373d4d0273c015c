package dev.ferry.rpc.events;

import java.util.concurrent.TimeUnit;

import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;

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

    /**
     * The event types, registered with the flight recorder on first use: only once it runs (see
     * {@link #on}), because registering the first one initializes the recorder, which takes long
     * enough (hundreds of milliseconds on a loaded machine) to stall the thread that asks.
     */
    private static final class Types {
        static final EventType SLOW_CALL = EventType.getEventType(SlowCallEvent.class);
        static final EventType SLOW_HANDLER = EventType.getEventType(SlowHandlerEvent.class);
        static final EventType BREAKER_OPENED = EventType.getEventType(BreakerOpenedEvent.class);
        static final EventType BREAKER_CLOSED = EventType.getEventType(BreakerClosedEvent.class);
    }

    /** True if a recording could want an event: the recorder runs (a cheap static read until it does). */
    private static boolean on() {
        return FlightRecorder.isInitialized();
    }

    private RpcEvents() {
    }

    /** A client call completed after {@code nanos}. */
    public static void callCompleted(int method, String server, long callId, long nanos, boolean ok) {
        if (nanos < SLOW_CALL_NANOS || !on() || !Types.SLOW_CALL.isEnabled()) {
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
        if (nanos < SLOW_CALL_NANOS || !on() || !Types.SLOW_HANDLER.isEnabled()) {
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
        if (!on() || !Types.BREAKER_OPENED.isEnabled()) {
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
        if (!on() || !Types.BREAKER_CLOSED.isEnabled()) {
            return;
        }
        BreakerClosedEvent e = new BreakerClosedEvent();
        e.server = server;
        e.openFor = openNanos;
        e.commit();
    }
}
