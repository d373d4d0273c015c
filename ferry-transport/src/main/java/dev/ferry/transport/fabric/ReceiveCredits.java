package dev.ferry.transport.fabric;

/**
 * Receive-credit flow control of one link, from both ends.
 *
 * <p>As a sender, the link holds one credit per receive buffer the peer has posted for it and
 * spends one per frame, so nothing ever arrives to a missing buffer (no RNR, no unexpected
 * queue at the provider). Messages may not take the last {@link #RESERVE} credits: those are
 * kept for credit-return frames, so that returning credits can never deadlock.
 *
 * <p>As a receiver, it counts the buffers reposted since credits were last returned
 * ({@code owed}) and what the peer still holds ({@code peerHeld}). Credits go back in the header
 * of any frame to the peer; a credit-only frame goes once half the window is owed, or as soon as
 * the peer runs low, whichever comes first. A credit-only frame spends a credit too, but the
 * buffer it took is owed back only lazily (in the next frame's header, or once two are owed):
 * returning it at once would take one of the peer's buffers in turn, and two links that each
 * answered the other's credit-only frame would trade them for ever.
 *
 * <p>The grant moves: a receiver with buffers to spare grants an active peer more
 * ({@link #grant}), and takes credits back from an idle one: it asks, the peer gives up what it
 * holds beyond a floor ({@link #yieldUpTo}), and the receiver counts them gone
 * ({@link #withdrawn}).
 */
final class ReceiveCredits {

    /** Credits kept for credit-return frames. */
    static final int RESERVE = 2;

    /** Credits the peer may hold at most: the buffers this side sets aside for the link. */
    private int window;
    /** Credits this side may spend sending to the peer. Written by the progress thread. */
    private volatile int available;
    private int owed;
    private boolean flush;
    private int peerHeld;
    /** Whether the peer sent a frame other than a credit-only one since credits last went back. */
    private boolean peerSpending;

    /**
     * @param granted credits this side grants the peer (buffers it posts for the link)
     * @param received credits the peer granted this side
     */
    ReceiveCredits(int granted, int received) {
        this.window = granted;
        this.available = received;
        this.peerHeld = granted;
    }

    /** Whether a message may be sent now. Any thread. */
    boolean canSendMessage() {
        return available > RESERVE;
    }

    /** Whether a credit-only or control frame may be sent now. */
    boolean canSendControl() {
        return available > 0;
    }

    int available() {
        return available;
    }

    /** The credits to piggyback on the next frame. */
    int toReturn() {
        return Math.min(owed, FrameDescriptor.MAX_CREDITS);
    }

    /** A frame carrying {@code returned} credits was posted: it took one credit. */
    void spent(int returned) {
        available--;
        owed -= returned;
        peerHeld += returned;
        if (returned > 0) {
            flush = false;
            peerSpending = false;
        }
    }

    /**
     * Asks for the credits owed to go back on the next chance, however few: the periodic flush
     * that keeps a link live even if this side's count of what the peer holds were off (a frame
     * the provider delivered before the link was known, say).
     */
    void flush() {
        flush = owed > 0;
    }

    /** Credits the peer returned in a frame's header. */
    void returned(int credits) {
        available += credits;
    }

    /**
     * A frame from the peer took one of the buffers it held a credit for; {@code creditOnly}: a
     * frame that carried nothing but returned credits.
     */
    void arrived(boolean creditOnly) {
        peerHeld--;
        if (!creditOnly) {
            peerSpending = true;
        }
    }

    /** A buffer was reposted: one more credit to return. */
    void reposted() {
        owed++;
    }

    /**
     * Whether a credit-only frame should go now: the periodic flush, half the window owed, or the
     * peer down to its last message credit, once the peer has sent something other than credit-only
     * frames since credits last went back; otherwise only once at least two are owed (what the
     * peer's own credit-only frames took: one such frame answered by one would never end).
     */
    boolean shouldReturn() {
        if (owed <= 0) {
            return false;
        }
        if (peerSpending) {
            return flush || owed >= Math.max(1, window / 2) || peerHeld <= RESERVE + 1;
        }
        return owed >= Math.max(2, window / 2) || flush && owed > 1;
    }

    int owed() {
        return owed;
    }

    /** Credits this side grants the peer now. */
    int window() {
        return window;
    }

    /** Receiver: {@code extra} more buffers are set aside for the peer; they go back as credits. */
    void grant(int extra) {
        window += extra;
        owed += extra;
    }

    /**
     * Sender: the receiver asked for {@code asked} credits back. Gives up as many as it holds
     * beyond {@code floor}, never more than asked; returns how many.
     */
    int yieldUpTo(int asked, int floor) {
        int given = Math.max(0, Math.min(asked, available - floor));
        available -= given;
        return given;
    }

    /**
     * Receiver: keeps up to {@code max} of the credits owed (reposted, not yet returned) instead
     * of returning them; returns how many.
     */
    int keepOwed(int max) {
        int kept = Math.max(0, Math.min(owed, max));
        owed -= kept;
        window -= kept;
        return kept;
    }

    /** Receiver: the peer gave {@code credits} back. */
    void withdrawn(int credits) {
        window -= credits;
        peerHeld -= credits;
    }

    /** Credits the peer holds, as this side counts them. */
    int peerHeld() {
        return peerHeld;
    }
}
