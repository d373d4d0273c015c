package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * Credit accounting of one link, both ends played by hand: what one side spends, the other sees
 * arrive, repost and return; grants move without either side ever going negative.
 */
class ReceiveCreditsTest {

    /** Sender {@code a} sends {@code n} frames to receiver {@code b}, which reposts them. */
    private static void deliver(ReceiveCredits a, ReceiveCredits b, int n) {
        for (int i = 0; i < n; i++) {
            int piggyback = a.toReturn();
            a.spent(piggyback);
            b.arrived(false);
            b.returned(piggyback);
            b.reposted();
        }
    }

    /** {@code from} sends one credit-only frame to {@code to}. */
    private static void returnCredits(ReceiveCredits from, ReceiveCredits to) {
        int piggyback = from.toReturn();
        from.spent(piggyback);
        to.arrived(true);
        to.returned(piggyback);
        to.reposted();
    }

    /**
     * Credit-only frames where one is due, {@code b}'s first, until neither side has one to send
     * or {@code max} went; how many went.
     */
    private static int settle(ReceiveCredits a, ReceiveCredits b, int max) {
        int frames = 0;
        while (frames < max) {
            if (b.shouldReturn() && b.canSendControl()) {
                returnCredits(b, a);
            } else if (a.shouldReturn() && a.canSendControl()) {
                returnCredits(a, b);
            } else {
                break;
            }
            frames++;
        }
        return frames;
    }

    @Test
    void messagesStopAtTheReserveAndCreditFramesMayUseIt() {
        ReceiveCredits sender = new ReceiveCredits(8, 8);
        ReceiveCredits receiver = new ReceiveCredits(8, 8);
        int sent = 0;
        while (sender.canSendMessage()) {
            deliver(sender, receiver, 1);
            sent++;
        }
        assertEquals(8 - ReceiveCredits.RESERVE, sent);
        assertEquals(ReceiveCredits.RESERVE, sender.available());
        assertTrue(sender.canSendControl(), "the reserve is for credit frames");
        assertTrue(receiver.shouldReturn(), "half the window is owed");
        returnCredits(receiver, sender);
        assertEquals(8, sender.available(), "every credit is back");
        assertEquals(7, receiver.available(), "the credit frame took one of the receiver's own");
        assertEquals(0, receiver.owed());
    }

    @Test
    void aCreditFrameGoesWhenThePeerRunsLowEvenBelowHalfTheWindow() {
        ReceiveCredits sender = new ReceiveCredits(64, 4);
        ReceiveCredits receiver = new ReceiveCredits(4, 64);
        deliver(sender, receiver, 1);
        assertTrue(receiver.shouldReturn(), "peer holds " + receiver.peerHeld() + " credits");
    }

    @Test
    void aGrantGrowsTheWindowAndReachesTheSenderInAHeader() {
        ReceiveCredits sender = new ReceiveCredits(8, 8);
        ReceiveCredits receiver = new ReceiveCredits(8, 8);
        receiver.grant(20);
        assertEquals(28, receiver.window());
        assertEquals(20, receiver.owed());
        returnCredits(receiver, sender);
        assertEquals(28, sender.available());
        assertEquals(28, receiver.peerHeld());
    }

    @Test
    void anIdlePeerYieldsDownToTheFloorAndBothSidesAgree() {
        ReceiveCredits sender = new ReceiveCredits(8, 40);
        ReceiveCredits receiver = new ReceiveCredits(40, 8);
        deliver(sender, receiver, 10); // ten buffers reposted and owed, not yet returned
        int kept = receiver.keepOwed(36);
        assertEquals(10, kept, "owed credits are taken back without asking");
        assertEquals(30, receiver.window());
        assertEquals(30, sender.available());
        int floor = ReceiveCredits.RESERVE + 2;
        int asked = receiver.peerHeld() - floor;
        int given = sender.yieldUpTo(asked, floor);
        assertEquals(26, given);
        receiver.withdrawn(given);
        assertEquals(floor, sender.available());
        assertEquals(floor, receiver.peerHeld());
        assertEquals(floor, receiver.window());
        assertTrue(sender.canSendMessage(), "the floor still lets a message through");
    }

    @Test
    void aSenderNeverYieldsBelowTheFloorOrMoreThanAsked() {
        ReceiveCredits sender = new ReceiveCredits(8, 5);
        assertEquals(1, sender.yieldUpTo(10, 4));
        assertEquals(0, sender.yieldUpTo(10, 4));
        ReceiveCredits rich = new ReceiveCredits(8, 50);
        assertEquals(3, rich.yieldUpTo(3, 4));
        assertEquals(47, rich.available());
    }

    @Test
    void aFlushReturnsEvenOneOwedCreditAndLastsUntilCreditsGo() {
        ReceiveCredits sender = new ReceiveCredits(64, 64);
        ReceiveCredits receiver = new ReceiveCredits(64, 64);
        deliver(sender, receiver, 1);
        assertFalse(receiver.shouldReturn(), "one credit of 64 owed: no frame of its own yet");
        receiver.flush();
        assertTrue(receiver.shouldReturn(), "the periodic flush sends it anyway");
        returnCredits(receiver, sender);
        assertFalse(receiver.shouldReturn(), "the flush ends with the credits it sent");
        assertEquals(64, sender.available());
    }

    /**
     * Two sides at the smallest window (what an idle link is trimmed to): a message, then credit
     * frames only where one is due. Each credit-only frame takes a buffer of its receiver, and if
     * that buffer's credit went straight back, the two sides would trade one frame for ever.
     */
    @Test
    void creditOnlyFramesAreNotAnsweredOneForOne() {
        int floor = CreditBalancer.CREDIT_FLOOR;
        ReceiveCredits a = new ReceiveCredits(floor, floor);
        ReceiveCredits b = new ReceiveCredits(floor, floor);
        deliver(a, b, 1);
        assertTrue(b.shouldReturn(), "the peer is down to " + b.peerHeld() + " credits: its message goes back");
        int frames = settle(a, b, 100);
        assertEquals(1, frames, "credit-only frames, one message in");
        assertEquals(floor, a.available(), "the sender has every credit back");
        assertEquals(1, a.owed(), "the credit-only frame's buffer waits for a frame to ride on");
        assertEquals(floor - 1, b.available());
        deliver(a, b, 1);
        assertEquals(floor, b.available(), "the next message carried it back");
        assertEquals(0, a.owed());
    }

    @Test
    void creditOnlyFramesAloneGoBackOnceTwoAreOwedAndNeverBounceForEver() {
        int floor = CreditBalancer.CREDIT_FLOOR;
        ReceiveCredits a = new ReceiveCredits(floor, floor);
        ReceiveCredits b = new ReceiveCredits(floor, floor);
        // b sends a message; a's flush returns its credit (frame c1, still on the wire); b sends
        // another, with nothing to piggyback yet; c1 arrives; a's flush returns the second (c2).
        // b now owes two buffers, both taken by credit-only frames.
        deliver(b, a, 1);
        a.flush();
        assertTrue(a.shouldReturn(), "the peer sent a message: the flush returns its credit");
        int c1 = a.toReturn();
        a.spent(c1);
        deliver(b, a, 1);
        b.arrived(true);
        b.returned(c1);
        b.reposted();
        a.flush();
        assertTrue(a.shouldReturn());
        returnCredits(a, b);
        assertEquals(0, a.owed());
        assertTrue(b.shouldReturn(), "two owed, by credit-only frames alone: they go back");
        int frames = settle(a, b, 100);
        assertEquals(1, frames, "one frame back, and quiet");
        a.flush();
        b.flush();
        assertFalse(a.shouldReturn(), "one credit-only frame's buffer is not flushed on its own");
        assertFalse(b.shouldReturn());
        assertTrue(a.available() >= floor - 1 && b.available() >= floor - 1,
                "each side short of at most one credit: " + a.available() + ", " + b.available());
    }

    @Test
    void aPeerSendingMessagesNeverStallsOnCreditsWithAnySmallWindow() {
        for (int window = 3; window <= 12; window++) {
            ReceiveCredits sender = new ReceiveCredits(window, window);
            ReceiveCredits receiver = new ReceiveCredits(window, window);
            for (int m = 0; m < 1_000; m++) {
                assertTrue(sender.canSendMessage(), "window " + window + ", message " + m + ": stalled");
                deliver(sender, receiver, 1);
                settle(sender, receiver, 4);
            }
            assertTrue(receiver.available() > 0, "window " + window + ": the receiver can still return credits");
        }
    }

    @Test
    void nothingIsOwedWhenNothingArrived() {
        ReceiveCredits credits = new ReceiveCredits(16, 16);
        assertFalse(credits.shouldReturn());
        assertEquals(0, credits.keepOwed(10));
        assertEquals(16, credits.window());
    }
}
