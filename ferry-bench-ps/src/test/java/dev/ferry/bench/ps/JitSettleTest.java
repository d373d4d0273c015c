package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/** {@link JitSettle}: the warm-up ends once the compilers' share of the CPU over 5 s is under the given share, or at the limit. */
class JitSettleTest {

    private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

    /** Cumulative CPU of a run: 2 cores busy; its compilers at a share that the test changes. */
    private static final class Counters {
        long cpu;
        long compilers;
        int reads;

        void advance(double compilerShare) {
            cpu += 2 * SECOND;
            compilers += (long) (2 * SECOND * compilerShare);
        }

        long cpu() {
            reads++;
            return cpu;
        }
    }

    @Test
    void settlesOnceTheLastFiveSecondsAreUnderTheShare() {
        JitSettle settle = new JitSettle(0.05);
        Counters c = new Counters();
        long now = 0;
        // 20 s of compilers at 20%: never settled, the share read over the window.
        for (int s = 0; s <= 20; s++, now += SECOND) {
            assertFalse(settle.settled(now, c::cpu, () -> c.compilers), "second " + s);
            c.advance(0.20);
        }
        assertEquals(0.20, settle.lastShare(), 1e-9);
        // Then at 2%: settled only when the whole window is quiet (five more seconds), not before.
        int quiet = 0;
        while (!settle.settled(now, c::cpu, () -> c.compilers)) {
            c.advance(0.02);
            now += SECOND;
            quiet++;
            assertTrue(quiet <= 6, "not settled after " + quiet + " quiet seconds");
        }
        assertTrue(quiet >= 5, "settled after " + quiet + " quiet seconds: the window still held busy ones");
        assertTrue(settle.lastShare() < 0.05, String.valueOf(settle.lastShare()));
        assertFalse(settle.timedOut());
        // Once settled it stays so without reading the counters again.
        int reads = c.reads;
        assertTrue(settle.settled(now + 10 * SECOND, c::cpu, () -> c.compilers));
        assertEquals(reads, c.reads);
    }

    @Test
    void stepsThatFallAFewTenthsPastTheSecondStillMakeAWindow() {
        // A push loop samples at its first step a second or more after the last: 1.1 s apart.
        JitSettle settle = new JitSettle(0.05);
        Counters c = new Counters();
        long step = SECOND + SECOND / 10;
        long now = 0;
        for (int i = 0; i < 8; i++, now += step) {
            assertFalse(settle.settled(now, c::cpu, () -> c.compilers));
            c.advance(0.20);
        }
        assertEquals(0.20, settle.lastShare(), 1e-9, "no share read over a window of 1.1 s samples");
        for (int i = 0; i < 6; i++, now += step) {
            settle.settled(now, c::cpu, () -> c.compilers);
            c.advance(0.01);
        }
        assertTrue(settle.settled(now, c::cpu, () -> c.compilers), String.valueOf(settle.lastShare()));
    }

    @Test
    void samplesAtMostOnceASecond() {
        JitSettle settle = new JitSettle(0.05);
        Counters c = new Counters();
        for (long t = 0; t < SECOND; t += SECOND / 10) {
            settle.settled(t, c::cpu, () -> c.compilers);
        }
        assertEquals(1, c.reads);
        settle.settled(SECOND, c::cpu, () -> c.compilers);
        assertEquals(2, c.reads);
    }

    @Test
    void endsAtTheLimitWithTheCompilersStillBusy() {
        JitSettle settle = new JitSettle(0.05);
        Counters c = new Counters();
        long now = 0;
        while (!settle.settled(now, c::cpu, () -> c.compilers)) {
            c.advance(0.30);
            now += SECOND;
            assertTrue(now <= JitSettle.LIMIT_NANOS + 2 * SECOND, "no end at the limit");
        }
        assertTrue(settle.timedOut());
        assertEquals(JitSettle.LIMIT_NANOS, now);
        assertEquals(0.30, settle.lastShare(), 1e-9);
    }

    @Test
    void aShareOutsideZeroToOneIsRefusedWithTheOption() {
        for (double bad : new double[] {0, 1, -0.1, 1.5, Double.NaN}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new JitSettle(bad));
            assertTrue(e.getMessage().contains("--settle"), e.getMessage());
        }
    }
}
