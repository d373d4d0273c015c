package dev.ferry.transport.events;

/**
 * Emits the transport's flight-recorder events. Every method checks that its event type is
 * enabled before it makes the event, so with no recording (or the event off) the data path
 * pays one branch and allocates nothing.
 */
public final class TransportEvents {

    private static final EventGate LINK_OPENED = new EventGate(LinkOpenedEvent.class);
    private static final EventGate LINK_FAILED = new EventGate(LinkFailedEvent.class);
    private static final EventGate CREDIT_STALL = new EventGate(CreditStallEvent.class);
    private static final EventGate WINDOW_STALL = new EventGate(WindowStallEvent.class);
    private static final EventGate RENDEZVOUS = new EventGate(RendezvousEvent.class);

    private TransportEvents() {
    }

    /** A link is ready to carry messages. */
    public static void linkOpened(String provider, String peer, int linkId, int linksOpen) {
        if (!LINK_OPENED.enabled()) {
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
        if (!LINK_FAILED.enabled()) {
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
        if (!CREDIT_STALL.enabled()) {
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
        if (!WINDOW_STALL.enabled()) {
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
        return RENDEZVOUS.enabled() ? System.nanoTime() : 0;
    }

    /** A rendezvous payload was pulled whole; {@code startNanos} is from {@link #rendezvousStart}. */
    public static void rendezvous(String provider, String peer, int linkId, long bytes, long chunkBytes,
            long startNanos) {
        if (startNanos == 0 || !RENDEZVOUS.enabled()) {
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
