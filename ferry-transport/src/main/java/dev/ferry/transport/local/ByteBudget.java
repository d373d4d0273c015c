package dev.ferry.transport.local;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A cap on bytes in flight, shared by any number of threads. An amount larger than the whole
 * budget passes alone, when nothing else is in flight, so a message bigger than a window is slow
 * but never stuck.
 */
final class ByteBudget {

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    ByteBudget(long limit) {
        this.limit = limit;
    }

    /** Takes {@code bytes} if they fit now; never waits. */
    boolean tryAcquire(long bytes) {
        while (true) {
            long current = used.get();
            if (current != 0 && current + bytes > limit) {
                return false;
            }
            long next = current + bytes;
            if (used.compareAndSet(current, next)) {
                if (next > peak.get()) {
                    peak.accumulateAndGet(next, Math::max);
                }
                return true;
            }
        }
    }

    void release(long bytes) {
        long left = used.addAndGet(-bytes);
        assert left >= 0 : "released more than acquired: " + left;
    }

    long used() {
        return used.get();
    }

    long peak() {
        return peak.get();
    }
}
