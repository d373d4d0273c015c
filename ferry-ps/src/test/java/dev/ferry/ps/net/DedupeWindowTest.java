package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.stream.LongStream;

import org.junit.jupiter.api.Test;

/** The per-group window of dedupe ids: bounded, oldest forgotten first, a move's older ids kept behind newer ones. */
class DedupeWindowTest {

    private static final int N = DedupeWindow.PER_GROUP;

    @Test
    void theOldestIdIsForgottenFirst() {
        DedupeWindow w = new DedupeWindow();
        for (long d = 1; d <= N + 1; d++) {
            w.record(3, d);
        }
        assertFalse(w.contains(3, 1), "the oldest went");
        assertTrue(w.contains(3, 2) && w.contains(3, N + 1));
        assertFalse(w.contains(4, 2), "windows are per group");
        w.record(3, 5);
        assertTrue(w.contains(3, 2), "a repeat takes no room");
    }

    /**
     * A move's target records the first forwarded pushes, then the source's window (MOVE_DEDUPE):
     * with the source's window full, the forwarded ids, newest, must stay; the oldest of the
     * source's go. Recorded in arrival order, the source's 256 ids evicted every forwarded one,
     * whose retry there was then applied twice.
     */
    @Test
    void aMovesOlderIdsGoInBehindTheForwardedOnes() {
        DedupeWindow w = new DedupeWindow();
        w.record(9, 1_001);
        w.record(9, 1_002);
        long[] older = LongStream.rangeClosed(1, N).toArray();
        w.recordOlder(9, older, older.length);
        assertTrue(w.contains(9, 1_001) && w.contains(9, 1_002), "the forwarded ids stay");
        assertFalse(w.contains(9, 1) || w.contains(9, 2), "the two oldest of the source's went");
        assertTrue(w.contains(9, 3) && w.contains(9, N));
        long[] ids = w.ids(9);
        assertArrayEquals(new long[] {3, 4}, java.util.Arrays.copyOf(ids, 2), "oldest first");
        assertArrayEquals(new long[] {N, 1_001, 1_002}, java.util.Arrays.copyOfRange(ids, N - 3, N));
        w.record(9, 2_000);
        assertFalse(w.contains(9, 3), "the next record evicts the oldest, the source's");
        assertTrue(w.contains(9, 1_001));
        // A source id the target recorded already (a forward) takes no second place.
        DedupeWindow v = new DedupeWindow();
        v.record(1, 7);
        v.recordOlder(1, new long[] {6, 7}, 2);
        assertArrayEquals(new long[] {6, 7}, v.ids(1));
    }

    @Test
    void anIdRecordedWithoutTheScanTakesItsPlaceInTheRingLikeAnyOther() {
        DedupeWindow w = new DedupeWindow();
        w.record(3, 1);
        for (long d = 2; d <= N + 1; d++) {
            w.recordAbsent(3, d);
        }
        w.recordAbsent(3, 0);
        assertFalse(w.contains(3, 1), "the oldest went when the ring was full");
        assertTrue(w.contains(3, 2));
        assertTrue(w.contains(3, N + 1));
        assertFalse(w.contains(4, N + 1), "another group's window");
        assertEquals(N, w.ids(3).length);
        assertEquals(2, w.ids(3)[0], "oldest first");
    }
}
