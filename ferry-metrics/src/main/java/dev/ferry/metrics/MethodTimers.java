package dev.ferry.metrics;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;

/**
 * One latency histogram per method and outcome, all made up front: recording finds its timer by
 * a scan of a small int array and adds to the timer's buckets, so it neither allocates nor
 * locks. Buckets follow 1-2-5 steps from 10 us to 10 s (19 of them), enough for p50 and p99 at
 * the resolution a dashboard shows.
 */
final class MethodTimers {

    /** The histogram's bucket bounds. */
    static final Duration[] BUCKETS = buckets();

    private final int[] ids;
    private final Timer[] ok;
    private final Timer[] failed;

    /**
     * @param name    the timer's name ({@code ferry.rpc.client.call})
     * @param help    its description
     * @param outcome tag ok and error apart ({@code outcome} tag); false: one timer per method
     */
    MethodTimers(MeterRegistry registry, String name, String help, MethodNames names, boolean outcome) {
        int n = names.names().size();
        ids = new int[n];
        ok = new Timer[n + 1];
        failed = new Timer[n + 1];
        int i = 0;
        for (Map.Entry<Integer, String> e : names.names().entrySet()) {
            ids[i] = e.getKey();
            ok[i] = timer(registry, name, help, e.getValue(), outcome ? "ok" : null);
            failed[i] = outcome ? timer(registry, name, help, e.getValue(), "error") : ok[i];
            i++;
        }
        ok[n] = timer(registry, name, help, MethodNames.OTHER, outcome ? "ok" : null);
        failed[n] = outcome ? timer(registry, name, help, MethodNames.OTHER, "error") : ok[n];
    }

    void record(int method, long nanos, boolean succeeded) {
        int i = 0;
        while (i < ids.length && ids[i] != method) {
            i++;
        }
        (succeeded ? ok[i] : failed[i]).record(nanos, TimeUnit.NANOSECONDS);
    }

    private static Timer timer(MeterRegistry registry, String name, String help, String method, String outcome) {
        Tags tags = Tags.of("method", method);
        if (outcome != null) {
            tags = tags.and("outcome", outcome);
        }
        return Timer.builder(name).description(help).tags(tags).serviceLevelObjectives(BUCKETS)
                .minimumExpectedValue(BUCKETS[0]).maximumExpectedValue(BUCKETS[BUCKETS.length - 1])
                .register(registry);
    }

    private static Duration[] buckets() {
        Duration[] b = new Duration[19];
        long micros = 10;
        for (int i = 0; i < b.length; i++) {
            long step = switch (i % 3) {
                case 0 -> 1;
                case 1 -> 2;
                default -> 5;
            };
            b[i] = Duration.ofNanos(micros * step * 1_000L);
            if (i % 3 == 2) {
                micros *= 10;
            }
        }
        return b;
    }
}
