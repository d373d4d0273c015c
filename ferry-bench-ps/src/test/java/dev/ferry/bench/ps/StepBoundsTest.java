package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** {@link StepBounds}: a push step's wire and CPU bounds from a run's counters, and where the report shows them. */
class StepBoundsTest {

    /** A push run of {@code steps} steps of {@code stepMillis}, with {@code cpuMillisPerStep} of CPU and {@code bytesPerStep} on the port. */
    private static RunResult run(String transport, int steps, long stepMillis, double cpuMillisPerStep, long bytesPerStep) {
        Histogram latency = new Histogram(3);
        latency.recordValue(50_000_000L);
        Histogram stepTimes = new Histogram(3);
        for (int i = 0; i < steps; i++) {
            stepTimes.recordValue(stepMillis * 1_000_000L);
        }
        Map<String, Long> counters = new LinkedHashMap<>();
        counters.put("net_bottleneck_drops", 0L);
        counters.put("net_bottleneck_bytes", bytesPerStep * steps);
        return new RunResult("push", transport, true, latency, 16L * steps, 16L * 4096 * steps, 0, 25.0,
                (long) (cpuMillisPerStep * 1e6) * steps, stepTimes, counters);
    }

    @Test
    void tcOutputGivesPacketsDropsAndBytes() {
        String out = """
                qdisc tbf 8001: root refcnt 2 rate 2Gbit burst 32Kb lat 1.0ms
                 Sent 176848123 bytes 19876 pkt (dropped 12, overlimits 3 requeues 0)
                 backlog 0b 0p requeues 0
                """;
        assertArrayEquals(new long[] {19876, 12, 176848123}, Netlab.qdiscCounters(out));
        assertArrayEquals(new long[] {0, 0, 0}, Netlab.qdiscCounters(""));
    }

    @Test
    void aStepWhoseCpuOverTheCoresExceedsItsWireTimeIsCpuBound() {
        // 16 pushes of 1.05 MB a step (16.8 MB: 67.2 ms at 2 Gbit/s) and 16 x 13.97 ms of CPU (111.8 ms on 2 cores).
        RunResult r = run("tcp", 100, 126, 16 * 13.97, 16_800_000L);
        StepBounds b = StepBounds.of(r, 2_000_000_000L, 2);
        assertEquals(67_200, b.wireMicros());
        assertEquals(111_760, b.cpuFloorMicros());
        assertEquals(126_000, b.stepMicros(), 100);
        assertTrue(b.cpuBound());
        assertTrue(b.describe("tcp").contains("the host's cores bound the step"), b.describe("tcp"));
        // The same bytes with a quarter of the CPU: the port bounds the step.
        StepBounds light = StepBounds.of(run("tcp", 100, 70, 16 * 3.5, 16_800_000L), 2_000_000_000L, 2);
        assertEquals(28_000, light.cpuFloorMicros());
        assertFalse(light.cpuBound());
        assertTrue(light.describe("tcp").endsWith("the port bounds the step"), light.describe("tcp"));
    }

    @Test
    void noBoundsWithoutStepsOrBytes() {
        assertNull(StepBounds.of(run("tcp", 0, 100, 10, 1_000_000L), 2_000_000_000L, 2));
        assertNull(StepBounds.of(run("tcp", 10, 100, 10, 0L), 2_000_000_000L, 2));
        assertNull(StepBounds.of(run("tcp", 10, 100, 10, 1_000_000L), 0, 2));
    }

    @Test
    void theNetworkTableShowsTheStepBesideItsBounds() {
        RunResult tcp = run("tcp", 100, 126, 16 * 13.97, 16_800_000L);
        StepBounds b = StepBounds.of(tcp, 2_000_000_000L, 2);
        tcp.counters().put("step_wire_us", b.wireMicros());
        tcp.counters().put("step_cpu_floor_us", b.cpuFloorMicros());
        RunResult netty = run("netty", 100, 220, 16 * 13.07, 16_800_000L);
        netty.counters().remove("net_bottleneck_bytes");
        List<String> table = Report.networkTable(List.of(tcp, netty));
        assertEquals(4, table.size(), String.join("\n", table));
        assertTrue(table.get(0).contains("| step ms | on the wire ms | CPU / cores ms |"), table.get(0));
        assertTrue(table.get(2).startsWith("| tcp ") && table.get(2).endsWith("|   126.0 |          67.2 |          111.8 |"),
                table.get(2));
        assertTrue(table.get(3).startsWith("| netty ") && table.get(3).endsWith("|       - |             - |              - |"),
                table.get(3));
    }
}
