package dev.ferry.memory;

import java.lang.ref.PhantomReference;
import java.lang.ref.ReferenceQueue;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * Finds buffers that became unreachable while in use.
 *
 * <p>Every buffer object gets one {@link Sentinel}, a phantom reference made when the object is
 * made, not per allocation: buffer objects are reused, and the allocator keeps no reference to
 * a buffer that is out, so a buffer its user dropped becomes phantom reachable and its sentinel
 * is queued. A sentinel whose buffer is out ({@code live}) at that point is a leak. The
 * allocation site is a {@link Throwable} recorded at allocation, for one allocation in
 * {@code leakSampleInterval} (every one under {@code PARANOID}). The queue is polled on the
 * allocator's slow paths and by {@link RegisteredAllocator#reportLeaks()}. The memory of a leaked
 * buffer is not reclaimed: the application may still hold a view of it.
 */
final class LeakDetector {

    /** The phantom reference of one buffer object, with what a report needs. */
    static final class Sentinel extends PhantomReference<RegisteredBuffer> {
        final String slot;
        final long capacity;
        /** Whether the buffer is out. Plain: read only after the buffer became unreachable. */
        boolean live;
        PoolKind pool;
        Throwable site;

        Sentinel(RegisteredBuffer buffer, ReferenceQueue<RegisteredBuffer> queue, String slot, PoolKind pool,
                 long capacity) {
            super(buffer, queue);
            this.slot = slot;
            this.pool = pool;
            this.capacity = capacity;
        }
    }

    final LeakDetection level;
    final int sampleInterval;
    private final Consumer<LeakReport> listener;
    private final ReferenceQueue<RegisteredBuffer> queue = new ReferenceQueue<>();
    /** Keeps sentinels reachable until their buffer is gone. */
    private final Set<Sentinel> sentinels = ConcurrentHashMap.newKeySet();
    private final AtomicLong leaks = new AtomicLong();

    LeakDetector(LeakDetection level, int sampleInterval, Consumer<LeakReport> listener) {
        this.level = level;
        this.sampleInterval = sampleInterval;
        this.listener = listener;
    }

    Sentinel track(RegisteredBuffer buffer, String slot, PoolKind pool, long capacity) {
        if (level == LeakDetection.DISABLED) {
            return null;
        }
        Sentinel sentinel = new Sentinel(buffer, queue, slot, pool, capacity);
        sentinels.add(sentinel);
        return sentinel;
    }

    /** The buffer object is discarded on purpose: its disappearance is no leak. */
    void forget(RegisteredBuffer buffer) {
        Sentinel sentinel = buffer.sentinel;
        if (sentinel != null) {
            sentinels.remove(sentinel);
            sentinel.clear();
        }
    }

    /** Reports every queued leak; returns how many. */
    int poll() {
        if (level == LeakDetection.DISABLED) {
            return 0;
        }
        int reported = 0;
        for (Object ref; (ref = queue.poll()) != null; ) {
            Sentinel sentinel = (Sentinel) ref;
            if (sentinels.remove(sentinel) && sentinel.live) {
                leaks.incrementAndGet();
                reported++;
                listener.accept(new LeakReport(describe(sentinel), sentinel.site));
            }
        }
        return reported;
    }

    long leaks() {
        return leaks.get();
    }

    /** The allocation sites of buffers still out, for the report of a close with buffers in use. */
    List<String> outstanding(int max) {
        List<String> out = new ArrayList<>();
        for (Sentinel sentinel : sentinels) {
            if (sentinel.live && out.size() < max) {
                LeakReport report = new LeakReport(describe(sentinel), sentinel.site);
                out.add(report.describe());
            }
        }
        return out;
    }

    void clear() {
        for (Sentinel sentinel : sentinels) {
            sentinel.clear();
        }
        sentinels.clear();
    }

    private static String describe(Sentinel sentinel) {
        return "RegisteredBuffer[" + sentinel.pool + " " + sentinel.capacity + " B " + sentinel.slot + "]";
    }
}
