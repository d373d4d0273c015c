package dev.ferry.transport.flow;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A cap on bytes in use (in flight, or taken from a pool), shared by any number of threads: the
 * send windows of the transports whose senders are many threads (the in-JVM and the Netty
 * transports; the fabric transport's window belongs to its progress thread). An amount larger
 * than the whole window is let through alone, when the window is empty, so a message bigger than
 * a window is slow but never stuck.
 */
public final class ByteWindow {

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();

    /** A window of {@code limit} bytes. */
    public ByteWindow(long limit) {
        if (limit < 1) {
            throw new IllegalArgumentException("a window needs at least one byte: " + limit);
        }
        this.limit = limit;
    }

    /** Takes {@code bytes} if they fit now; never waits. */
    public boolean tryAcquire(long bytes) {
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

    /** Whether {@code bytes} would fit now. */
    public boolean admits(long bytes) {
        long current = used.get();
        return current == 0 || current + bytes <= limit;
    }

    /** Gives back {@code bytes} taken by {@link #tryAcquire}. */
    public void release(long bytes) {
        long left = used.addAndGet(-bytes);
        assert left >= 0 : "released more than acquired: " + left;
    }

    /** Bytes in use now. */
    public long used() {
        return used.get();
    }

    /** The most bytes in use at once so far. */
    public long peak() {
        return peak.get();
    }

    /** The window's size. */
    public long limit() {
        return limit;
    }
}
