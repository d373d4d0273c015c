package dev.ferry.bench.ps;

import java.util.Locale;

/**
 * Two lower bounds of a synchronized push step on the emulated network: the time its bytes take
 * on the receiver's port ({@code wireMicros}: bytes through the bottleneck per step at the port's
 * rate), and the time its CPU takes on this host's cores ({@code cpuFloorMicros}: the CPU of every
 * process of the run per step, over the cores). A step can be no shorter than either; where the
 * CPU bound is the higher, the lab measured the host's cores, not the network (on two cores, 17
 * JVMs and the emulated switch's own packet processing share them).
 *
 * @param stepMicros     the measured mean step
 * @param wireMicros     the step's bytes at the port's rate
 * @param cpuFloorMicros the step's CPU over the cores
 * @param cores          the host's cores
 */
record StepBounds(long stepMicros, long wireMicros, long cpuFloorMicros, int cores) {

    /** The bounds of push result {@code r} (its {@code net_bottleneck_bytes} and CPU), or null without steps or bytes. */
    static StepBounds of(RunResult r, long portBitsPerSecond, int cores) {
        long bytes = r.counters().getOrDefault("net_bottleneck_bytes", 0L);
        if (r.steps() == null || r.steps().getTotalCount() == 0 || bytes <= 0 || portBitsPerSecond <= 0 || cores < 1) {
            return null;
        }
        long steps = r.steps().getTotalCount();
        double wire = bytes * 8.0 / portBitsPerSecond / steps * 1e6;
        double cpu = r.cpuNanos() / 1e3 / steps / cores;
        return new StepBounds(Math.round(r.steps().getMean() / 1e3), Math.round(wire), Math.round(cpu), cores);
    }

    /** Whether the CPU bound is above the wire's: the cores, not the port, set the step. */
    boolean cpuBound() {
        return cpuFloorMicros > wireMicros;
    }

    /** One line: the step, both bounds, and which one holds. */
    String describe(String label) {
        return String.format(Locale.ROOT, "%s: a step took %.1f ms; its bytes need %.1f ms on the receiver's port and "
                + "its CPU %.1f ms on %d cores: %s", label, stepMicros / 1e3, wireMicros / 1e3, cpuFloorMicros / 1e3,
                cores, cpuBound() ? "the host's cores bound the step, not the network" : "the port bounds the step");
    }
}
