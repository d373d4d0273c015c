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
 * the peer runs low, whichever comes first.
 */
final class ReceiveCredits {

    /** Credits kept for credit-return frames. */
    static final int RESERVE = 2;

    private final int window;
    /** Credits this side may spend sending to the peer. Written by the progress thread. */
    private volatile int available;
    private int owed;
    private int peerHeld;

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
    }

    /** Credits the peer returned in a frame's header. */
    void returned(int credits) {
        available += credits;
    }

    /** A frame from the peer took one of the buffers it held a credit for. */
    void arrived() {
        peerHeld--;
    }

    /** A buffer was reposted: one more credit to return. */
    void reposted() {
        owed++;
    }

    /** Whether a credit-only frame should go now. */
    boolean shouldReturn() {
        return owed > 0 && (owed >= Math.max(1, window / 2) || peerHeld <= RESERVE + 1);
    }

    int owed() {
        return owed;
    }
}
