package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

import dev.ferry.bench.ps.ProgressRate.Report;

/**
 * The progress line's rate is each worker's count over its own clock, summed: readings that
 * fall just before or after a report no longer read 0 and then twice the rate.
 */
class ProgressRateTest {

    private static final long SECOND = 1_000_000_000L;

    @Test
    void eachWorkersCountOverItsOwnClockIsSummed() {
        ProgressRate rate = new ProgressRate(2);
        // Worker 0 runs 1,000 ops a second, worker 1 3,000; they report at different moments.
        assertEquals(1_000 + 3_000, rate.update(new Report[] {
                new Report(750, 3 * SECOND / 4), new Report(3_000, SECOND)}), 1e-6);
        assertEquals(1_000 + 3_000, rate.update(new Report[] {
                new Report(2_000, 2 * SECOND), new Report(5_250, 7 * SECOND / 4)}), 1e-6);
    }

    @Test
    void aReadingBetweenTwoReportsOfTheDriversClockStillSeesTheWorkersRate() {
        // The driver's own clock would have read 0 here (no new report in its second) and twice
        // the rate next time; by the worker's clock both readings are the rate.
        ProgressRate rate = new ProgressRate(1);
        assertEquals(4_000, rate.update(new Report[] {new Report(4_000, SECOND)}), 1e-6);
        assertEquals(4_000, rate.update(new Report[] {new Report(5_000, 5 * SECOND / 4)}), 1e-6);
        assertEquals(0, rate.update(new Report[] {new Report(5_000, 5 * SECOND / 4)}), 1e-6,
                "a worker with no report since the last reading adds nothing");
        assertEquals(4_000, rate.update(new Report[] {new Report(9_000, 9 * SECOND / 4)}), 1e-6);
    }

    @Test
    void reportsAreReadFromTheLineAndBadOnesRefused() {
        assertEquals(new Report(12, 345), Report.parse(" 12 345 "));
        assertNull(Report.parse("12"), "an older worker's count alone has no clock");
        assertNull(Report.parse("12 x"));
        assertNull(Report.parse("-1 5"));
        assertNull(Report.parse(""));
        assertThrows(IllegalArgumentException.class, () -> new ProgressRate(2).update(new Report[] {Report.NONE}));
    }
}
