package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The demo's warm-up ends once three slices in a row agree within a tenth, and not before. */
class ThroughputSettleTest {

    @Test
    void aClimbingRateNeverSettlesAndAFlatOneDoesAtItsThirdSlice() {
        ThroughputSettle settle = new ThroughputSettle();
        // The demo's fetch on shm after a 2 s warm-up, per second.
        for (double rate : new double[] {254, 543, 755, 533, 938, 917, 1_300, 1_700, 2_100}) {
            assertFalse(settle.add(rate), "settled at " + rate);
        }
        assertFalse(settle.add(2_500));
        assertFalse(settle.add(2_600), "2,100 .. 2,600 is more than a tenth apart");
        assertTrue(settle.add(2_550), "2,500, 2,600, 2,550 agree within a tenth");
        assertTrue(settle.add(2_580));
        assertFalse(settle.add(1_900), "a slower slice starts the count again");
    }

    @Test
    void theBoundIsATenthOfTheSmallest() {
        ThroughputSettle settle = new ThroughputSettle();
        assertFalse(settle.add(1_000));
        assertFalse(settle.add(1_100));
        assertTrue(settle.add(1_050), "1,100 is 1.10x 1,000");
        ThroughputSettle wider = new ThroughputSettle();
        wider.add(1_000);
        wider.add(1_101);
        assertFalse(wider.add(1_050), "1,101 is over 1.10x 1,000");
    }

    @Test
    void slicesWithoutCallsNeverSettleAndBadRatesAreRefused() {
        ThroughputSettle settle = new ThroughputSettle();
        for (int i = 0; i < 5; i++) {
            assertFalse(settle.add(0), "a stalled workload is not a settled one");
        }
        assertEquals("a rate of calls per second: NaN",
                assertThrows(IllegalArgumentException.class, () -> settle.add(Double.NaN)).getMessage());
        assertThrows(IllegalArgumentException.class, () -> settle.add(-1));
        assertThrows(IllegalArgumentException.class, () -> settle.add(Double.POSITIVE_INFINITY));
    }
}
