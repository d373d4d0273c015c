package dev.ferry.transport.fabric;

import java.util.ArrayDeque;


/**
 * The sends whose buffers wait for their peer's release (RNDV_DONE): a rendezvous until the
 * peer has pulled it, a message by reference ({@link FrameDescriptor#RNDV_SHARED}) until the
 * receiver is done with it; and, after a teardown, the buffers of messages by reference that the
 * peer, another process, may still read, kept for {@link #LENT_GRACE_NANOS} before they are used
 * again. Progress thread only.
 */
final class AwaitedReleases {

    /** How long the buffer of a message by reference is kept after its peer failed. */
    static final long LENT_GRACE_NANOS = 10_000_000_000L;

    private final SendPump pump;
    private final SendWindow window;
    private final RendezvousKeys keys;
    private final FabricCounters counters;
    /** Sends awaiting their release, by cookie: no allocation per send once grown. */
    private final CookieMap<OutboundFrame> byCookie = new CookieMap<>(1024);
    /** Messages by reference failed with their peer, whose buffers wait out their grace, oldest first. */
    private final ArrayDeque<OutboundFrame> lent = new ArrayDeque<>();

    AwaitedReleases(SendPump pump, SendWindow window, RendezvousKeys keys, FabricCounters counters) {
        this.pump = pump;
        this.window = window;
        this.keys = keys;
        this.counters = counters;
    }

    /**
     * A message by reference reached its peer (its send completed, or its release came, which
     * proves delivery): settled once, its window back, as an eager message's at its completion.
     */
    void delivered(OutboundFrame frame) {
        if (frame.delivered) {
            return;
        }
        frame.delivered = true;
        window.release(frame.link, frame.length);
        pump.activate(frame.link);
        counters.messagesSent.increment();
        counters.bytesSent.add(frame.length);
        frame.settleEarly(null);
    }

    /** The peer released a message by reference: its buffer goes back once the provider is done with it too. */
    void returned(OutboundFrame frame) {
        frame.returned = true;
        if (frame.sendEnded) {
            frame.finish(null);
        }
    }

    /**
     * The provider is done with a message by reference (its send ended, in success, error or
     * dropped): the buffer goes back if the peer released it too, else at the release (or the
     * teardown's grace).
     */
    void sendEnded(OutboundFrame frame) {
        frame.sendEnded = true;
        if (frame.returned) {
            frame.finish(null);
        }
    }

    /** {@code frame} was posted and waits for its release. */
    void await(OutboundFrame frame) {
        byCookie.put(frame.cookie, frame);
    }

    /** Stops waiting for {@code cookie}'s release (its send failed); whether it was awaited. */
    boolean forget(long cookie) {
        return byCookie.remove(cookie) != null;
    }

    /**
     * The peer released {@code cookie} on {@code link}: the send, no longer awaited, or null if
     * no such send was made on that link (another link's transfer stays: its own peer may still
     * be pulling it).
     */
    OutboundFrame released(Link link, long cookie) {
        OutboundFrame sent = byCookie.get(cookie);
        if (sent == null || sent.link != link) {
            return null;
        }
        byCookie.remove(cookie);
        return sent;
    }

    /**
     * Teardown: fails the sends to {@code peer} not released. A rendezvous's window and buffer come
     * back now; a message by reference keeps its buffer for the grace: a link can fail while its
     * peer lives on and still reads the message in place, and a buffer reused at once would
     * change under it.
     */
    void failPeer(FabricPeer peer, Throwable cause) {
        long now = System.nanoTime();
        for (OutboundFrame frame : byCookie.removeIf(f -> f.peer == peer)) {
            keys.revoke(frame.cookie);
            if (frame.type == FrameDescriptor.RNDV_SHARED) {
                abandon(frame, cause, now);
            } else {
                window.release(frame.link, frame.length);
                frame.free();
                SendOutcomes.failFuture(frame, cause);
            }
        }
    }

    /**
     * A message by reference failed (its peer, or its send in error) before its release: settled
     * with {@code cause} unless delivered already, and its buffer kept out of use for the grace,
     * since the peer may still read it.
     */
    void abandon(OutboundFrame frame, Throwable cause, long now) {
        if (!frame.delivered) {
            window.release(frame.link, frame.length);
            frame.settleEarly(SendOutcomes.asFailure(cause));
        }
        frame.abandoned = true;
        frame.lentUntil = now + LENT_GRACE_NANOS;
        lent.add(frame);
    }

    /** Whether buffers of failed messages by reference wait for their grace to end. */
    boolean hasLent() {
        return !lent.isEmpty();
    }

    /** Frees the buffers whose grace ended by {@code now} ({@code all}: every one, the transport closes). */
    void releaseLent(long now, boolean all) {
        while (!lent.isEmpty() && (all || lent.peek().lentUntil - now <= 0)) {
            lent.poll().finish(null);
        }
    }

    /** Sends awaiting a release now; for tests. */
    int size() {
        return byCookie.size();
    }

}
