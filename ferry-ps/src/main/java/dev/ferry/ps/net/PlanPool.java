package dev.ferry.ps.net;

import java.util.concurrent.atomic.AtomicReferenceArray;

import dev.ferry.ps.BatchPlan;

/**
 * Plans of asynchronous batches, used again once a batch has succeeded: a push is planned on the
 * caller's thread and its plan is read until its last part completes, on another thread, so a
 * thread's own plan will not do. A plan holds about 50 bytes per id of its largest batch; a
 * 4,096-id push planned afresh each time allocated some 200 KB. Lock-free and allocation-free:
 * a fixed array of slots, taken and given back by compare-and-set; a plan given back to a full
 * pool is dropped, and so is one planned for more than the pool's largest batch (a plan keeps
 * the arrays of its largest batch), and an empty pool makes a new plan. Thread-safe.
 */
final class PlanPool {

    private final AtomicReferenceArray<BatchPlan> slots;
    private final int mask;
    private final int largestBatch;

    /**
     * A pool of at most {@code capacity} idle plans (a power of two), each of a batch of at most
     * {@code largestBatch} ids.
     */
    PlanPool(int capacity, int largestBatch) {
        if (Integer.bitCount(capacity) != 1) {
            throw new IllegalArgumentException("capacity " + capacity + " is not a power of two");
        }
        this.slots = new AtomicReferenceArray<>(capacity);
        this.mask = capacity - 1;
        this.largestBatch = largestBatch;
    }

    /** An idle plan, or a new one if none is idle. */
    BatchPlan take() {
        int start = start();
        for (int i = 0; i <= mask; i++) {
            int at = (start + i) & mask;
            BatchPlan plan = slots.get(at);
            if (plan != null && slots.compareAndSet(at, plan, null)) {
                return plan;
            }
        }
        return new BatchPlan();
    }

    /** Gives back a plan nothing reads any more ({@link PushLease} says when). */
    void give(BatchPlan plan) {
        if (plan.count() > largestBatch) {
            return;
        }
        int start = start();
        for (int i = 0; i <= mask; i++) {
            int at = (start + i) & mask;
            if (slots.get(at) == null && slots.compareAndSet(at, null, plan)) {
                return;
            }
        }
    }

    /** Idle plans now; for tests. */
    int idle() {
        int n = 0;
        for (int i = 0; i <= mask; i++) {
            n += slots.get(i) != null ? 1 : 0;
        }
        return n;
    }

    /** Threads start their scans at different slots. */
    private int start() {
        return (int) Thread.currentThread().threadId() & mask;
    }
}
