package dev.ferry.transport.events;

import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;

/**
 * Emits the transport's flight-recorder events. Every method checks that its event type is
 * enabled before it makes the event, so with no recording (or the event off) the data path
 * pays one branch and allocates nothing.
 */
public final class TransportEvents {

    /**
     * The event types, registered with the flight recorder on first use: only once it runs (see
     * {@link #on}), because registering the first one initializes the recorder, which takes long
     * enough (hundreds of milliseconds on a loaded machine) to stall the thread that asks.
     */
    private static final class Types {
        static final EventType LINK_OPENED = EventType.getEventType(LinkOpenedEvent.class);
        static final EventType LINK_FAILED = EventType.getEventType(LinkFailedEvent.class);
        static final EventType CREDIT_STALL = EventType.getEventType(CreditStallEvent.class);
        static final EventType WINDOW_STALL = EventType.getEventType(WindowStallEvent.class);
        static final EventType RENDEZVOUS = EventType.getEventType(RendezvousEvent.class);
    }

    /** True if a recording could want an event: the recorder runs (a cheap static read until it does). */
    private static boolean on() {
        return FlightRecorder.isInitialized();
    }

    private TransportEvents() {
    }

    /** A link is ready to carry messages. */
    public static void linkOpened(String provider, String peer, int linkId, int linksOpen) {
        if (!on() || !Types.LINK_OPENED.isEnabled()) {
            return;
        }
        LinkOpenedEvent e = new LinkOpenedEvent();
        e.provider = provider;
        e.peer = peer;
        e.linkId = linkId;
        e.linksOpen = linksOpen;
        e.commit();
    }

    /** A link was closed by an error; its peer's links go with it. */
    public static void linkFailed(String provider, String peer, int linkId, String reason) {
        if (!on() || !Types.LINK_FAILED.isEnabled()) {
            return;
        }
        LinkFailedEvent e = new LinkFailedEvent();
        e.provider = provider;
        e.peer = peer;
        e.linkId = linkId;
        e.reason = reason;
        e.commit();
    }

    /** A link's queue started waiting for a receive credit from its peer. */
    public static void creditStall(String provider, String peer, int linkId, int queued, long linkInFlight) {
        if (!on() || !Types.CREDIT_STALL.isEnabled()) {
            return;
        }
        CreditStallEvent e = new CreditStallEvent();
        e.provider = provider;
        e.peer = peer;
        e.linkId = linkId;
        e.queued = queued;
        e.linkInFlight = linkInFlight;
        e.commit();
    }

    /** A link's next message started waiting for room in a send window (link, peer or process). */
    public static void windowStall(String provider, String peer, int linkId, long messageBytes, long linkInFlight,
            long linkRendezvousInFlight) {
        if (!on() || !Types.WINDOW_STALL.isEnabled()) {
            return;
        }
        WindowStallEvent e = new WindowStallEvent();
        e.provider = provider;
        e.peer = peer;
        e.linkId = linkId;
        e.messageBytes = messageBytes;
        e.linkInFlight = linkInFlight;
        e.linkRendezvousInFlight = linkRendezvousInFlight;
        e.commit();
    }

    /**
     * The clock to pass to {@link #rendezvous} when a transfer is announced: {@link System#nanoTime()}
     * while the rendezvous event is on, else 0 (no clock read).
     */
    public static long rendezvousStart() {
        return on() && Types.RENDEZVOUS.isEnabled() ? System.nanoTime() : 0;
    }

    /** A rendezvous payload was pulled whole; {@code startNanos} is from {@link #rendezvousStart}. */
    public static void rendezvous(String provider, String peer, int linkId, long bytes, long chunkBytes,
            long startNanos) {
        if (startNanos == 0 || !on() || !Types.RENDEZVOUS.isEnabled()) {
            return;
        }
        RendezvousEvent e = new RendezvousEvent();
        e.provider = provider;
        e.peer = peer;
        e.linkId = linkId;
        e.bytes = bytes;
        e.chunks = (int) ((bytes + chunkBytes - 1) / chunkBytes);
        e.pullTime = System.nanoTime() - startNanos;
        e.commit();
    }
}
