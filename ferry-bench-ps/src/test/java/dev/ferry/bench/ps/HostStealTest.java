package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** Steal read from {@code /proc/stat}'s {@code cpu} line, its share over an interval, and a run's verdict. */
class HostStealTest {

    @Test
    void theCpuLineGivesStealAndTheTotalOfItsFirstEightFields() {
        // user nice system idle iowait irq softirq steal guest guest_nice
        HostSteal s = HostSteal.parse("cpu  1000 5 300 8000 40 0 15 640 0 0");
        assertEquals(640, s.stealTicks());
        assertEquals(1000 + 5 + 300 + 8000 + 40 + 15 + 640, s.totalTicks());
        assertNull(HostSteal.parse("cpu0 1 2 3 4 5 6 7 8 9 10"), "a single CPU's line is not the aggregate");
        assertNull(HostSteal.parse("cpu  1 2 3"), "too short for steal");
    }

    @Test
    void theShareIsOverTheIntervalAndUnknownWithoutBothEnds() {
        HostSteal from = new HostSteal(100, 10_000);
        HostSteal to = new HostSteal(150, 10_500);
        assertEquals(0.1, HostSteal.share(from, to), 1e-12);
        assertTrue(Double.isNaN(HostSteal.share(null, to)));
        assertTrue(Double.isNaN(HostSteal.share(from, null)));
        assertTrue(Double.isNaN(HostSteal.share(to, to)), "no time passed");
        // Slices of an interleaved run: their ticks add up before the share is taken.
        HostSteal later = new HostSteal(450, 11_000);
        HostSteal slices = HostSteal.NONE.plus(to.since(from)).plus(later.since(new HostSteal(150, 10_900)));
        assertEquals(350.0 / 600, slices.share(), 1e-12);
        assertTrue(Double.isNaN(HostSteal.NONE.share()), "no slice measured");
    }

    @Test
    void thisMachineHasAStealCounterThatDoesNotGoBack() {
        if (!Files.isReadable(Path.of("/proc/stat"))) {
            assertNull(HostSteal.now(), "no /proc/stat, no reading");
            return; // not Linux: runs record no steal
        }
        HostSteal a = HostSteal.now();
        HostSteal b = HostSteal.now();
        assertNotNull(a, "this Linux's /proc/stat was not read");
        assertTrue(b.stealTicks() >= a.stealTicks() && b.totalTicks() >= a.totalTicks(), a + " then " + b);
    }

    @Test
    void aRunIsDisturbedAboveFivePercentAndUnknownWithoutTheCounter() {
        assertEquals(false, HostSteal.disturbed(run(null)));
        assertTrue(Double.isNaN(HostSteal.of(run(null))));
        assertEquals(false, HostSteal.disturbed(run(50L)));
        assertEquals(true, HostSteal.disturbed(run(51L)));
        assertEquals(0.051, HostSteal.of(run(51L)), 1e-12);
    }

    private static RunResult run(Long permille) {
        Map<String, Long> counters = new HashMap<>();
        if (permille != null) {
            counters.put(HostSteal.COUNTER, permille);
        }
        return new RunResult("fetch", "shm", true, new Histogram(3), 1, 1, 0, 1.0, 1, null, counters);
    }
}
