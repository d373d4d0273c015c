package dev.ferry.metrics;

import java.util.function.Supplier;

/**
 * A value taken from {@code source} at most once per {@code maxAgeNanos}: the many meters of one
 * scrape read one snapshot instead of one each. Thread-safe; scrapes are rare, so it locks.
 */
final class Snapshot<T> {

    private final Supplier<T> source;
    private final long maxAgeNanos;
    private T value;
    private long takenNanos;

    Snapshot(Supplier<T> source, long maxAgeNanos) {
        this.source = source;
        this.maxAgeNanos = maxAgeNanos;
    }

    synchronized T get() {
        long now = System.nanoTime();
        if (value == null || now - takenNanos > maxAgeNanos) {
            value = source.get();
            takenNanos = now;
        }
        return value;
    }
}
