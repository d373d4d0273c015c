package dev.ferry.transport.netty;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A cap on bytes in use (in flight, or taken from a pool), shared by any number of threads.
 * An amount larger than the whole window is let through alone, when the window is empty, so a
 * message bigger than a window is slow but never stuck.
 */
final class ByteWindow {

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    ByteWindow(long limit) {
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
                peak.accumulateAndGet(next, Math::max);
                return true;
            }
        }
    }

    /** Whether {@code bytes} would fit now. */
    boolean admits(long bytes) {
        long current = used.get();
        return current == 0 || current + bytes <= limit;
    }

    void release(long bytes) {
        used.addAndGet(-bytes);
    }

    long used() {
        return used.get();
    }

    long peak() {
        return peak.get();
    }

    long limit() {
        return limit;
    }
}
