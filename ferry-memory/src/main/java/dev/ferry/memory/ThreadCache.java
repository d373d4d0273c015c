package dev.ferry.memory;

/**
 * One thread's cache of free buffers for one allocator: a bounded LIFO stack per pool and size
 * class (jemalloc's tcache, Netty's PoolThreadCache). Only the owning thread touches it while
 * that thread is alive, so the common allocate/release pair takes no lock and no atomic
 * instruction besides the buffer's own reference count.
 *
 * <p>An empty stack is refilled with half its capacity from the pool in one locked batch; a full
 * stack gives its older half back in one batch, keeping the recently used, cache-warm buffers.
 * A release goes to the releasing thread's cache whichever thread allocated the buffer, so a
 * cross-thread free touches nothing but that thread's own cache (and, in batches, the pool).
 *
 * <p>Counters are plain fields written by the owner; statistics sum them racily.
 */
final class ThreadCache {

    final Thread owner;
    /** Indexed by {@code pool.ordinal() * classCount + classIndex}. */
    final RegisteredBuffer[][] stacks;
    final int[] sizes;
    final int[] capacities;
    final long[] bytesInUse = new long[PoolKind.values().length];
    final long[] buffersInUse = new long[PoolKind.values().length];
    long hits;
    long misses;
    int sampleCountdown;

    ThreadCache(Thread owner, int classCount, int bytesPerClass, int maxBuffers, int sampleInterval) {
        this.owner = owner;
        int pools = PoolKind.values().length;
        stacks = new RegisteredBuffer[pools * classCount][];
        sizes = new int[pools * classCount];
        capacities = new int[pools * classCount];
        for (int i = 0; i < stacks.length; i++) {
            int slot = SizeClasses.size(i % classCount);
            int capacity = maxBuffers == 0 ? 0 : Math.clamp(bytesPerClass / slot, 1, maxBuffers);
            capacities[i] = capacity;
            stacks[i] = new RegisteredBuffer[capacity];
        }
        sampleCountdown = sampleInterval;
    }
}
