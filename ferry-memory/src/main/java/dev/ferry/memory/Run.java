package dev.ferry.memory;

/**
 * A block of slab pages cut into slots of one size class, and the buffer objects of those
 * slots.
 *
 * <p>Slots are carved lazily: {@code carved} slots have a buffer object, the others are still
 * bare memory, so a run that is never filled never creates objects for its tail. A buffer
 * object stays bound to its slot for the life of the run (under {@link LeakDetection#PARANOID}
 * a released one is replaced by a fresh successor for the same slot). {@code free} holds only
 * free buffers, so a buffer in use is reachable from its user alone, which is what lets the
 * leak detector notice when it is dropped. Guarded by the pool's lock.
 */
final class Run {

    final PoolArena pool;
    final Slab slab;
    final int page;
    final int order;
    final int classIndex;
    final int slotBytes;
    final int slots;
    private final long offset;
    private final RegisteredBuffer[] free;
    private int freeCount;
    private int carved;
    /** Whether the run is on its class's list of runs with slots left. */
    boolean available;

    Run(PoolArena pool, Slab slab, int page, int order, int classIndex) {
        this.pool = pool;
        this.slab = slab;
        this.page = page;
        this.order = order;
        this.classIndex = classIndex;
        this.slotBytes = SizeClasses.size(classIndex);
        this.offset = (long) page << SizeClasses.PAGE_SHIFT;
        this.slots = (int) (((long) SizeClasses.PAGE_BYTES << order) / slotBytes);
        this.free = new RegisteredBuffer[slots];
    }

    boolean hasSlots() {
        return freeCount > 0 || carved < slots;
    }

    /** Whether no slot is out of the run (in use or in a thread cache). */
    boolean unused() {
        return freeCount == carved;
    }

    RegisteredBuffer take() {
        if (freeCount > 0) {
            RegisteredBuffer buffer = free[--freeCount];
            free[freeCount] = null;
            return buffer;
        }
        long slotOffset = offset + (long) carved * slotBytes;
        carved++;
        return new RegisteredBuffer(pool, this, slab.segment.asSlice(slotOffset, slotBytes, slotBytes),
                slab.registration, slab.descriptor, slab.key, slotOffset, pool.allocator.detector);
    }

    void put(RegisteredBuffer buffer) {
        free[freeCount++] = buffer;
    }

    /** Forgets the buffers of an unused run before its pages go back to the slab. */
    void dispose() {
        for (int i = 0; i < freeCount; i++) {
            pool.allocator.detector.forget(free[i]);
            free[i] = null;
        }
        freeCount = 0;
        carved = 0;
    }
}
