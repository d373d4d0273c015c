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
            b.arrived();
            b.returned(piggyback);
            b.reposted();
        }
    }

    /** {@code from} sends one credit-only frame to {@code to}. */
    private static void returnCredits(ReceiveCredits from, ReceiveCredits to) {
        int piggyback = from.toReturn();
        from.spent(piggyback);
        to.arrived();
        to.returned(piggyback);
        to.reposted();
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

    @Test
    void nothingIsOwedWhenNothingArrived() {
        ReceiveCredits credits = new ReceiveCredits(16, 16);
        assertFalse(credits.shouldReturn());
        assertEquals(0, credits.keepOwed(10));
        assertEquals(16, credits.window());
    }
}
