package dev.ferry.memory;

import java.util.ArrayList;
import java.util.List;

/**
 * Every {@link ThreadCache} of one {@link RegisteredAllocator} not yet retired, the sweep that
 * returns the buffers cached by exited threads to the pools, and the counters of the caches
 * retired so far.
 *
 * <p>The list and the retired counters are guarded by the list's monitor. A cache's stacks are
 * emptied here by its owner ({@link #flush} from the owner's refill) or, once the owner has
 * exited, by any thread under the pool's lock ({@link #sweepExitedThreads}). The counters of
 * live caches are their owners' plain fields, summed racily by {@link #sum}.
 */
final class ThreadCaches {

    private final PoolArena[] pools;
    private final int classCount;
    /** Every thread cache not yet retired; its monitor also guards the retired counters. */
    private final List<ThreadCache> caches = new ArrayList<>();
    private final long[] retiredBytes = new long[PoolKind.values().length];
    private final long[] retiredBuffers = new long[PoolKind.values().length];
    private long retiredHits;
    private long retiredMisses;

    ThreadCaches(PoolArena[] pools, int classCount) {
        this.pools = pools;
        this.classCount = classCount;
    }

    /** Adds a new thread's cache. */
    void add(ThreadCache cache) {
        synchronized (caches) {
            caches.add(cache);
        }
    }

    /** Returns every buffer {@code cache} holds of {@code pool} to that pool. */
    void flush(ThreadCache cache, int pool) {
        PoolArena arena = pools[pool];
        for (int slot = pool * classCount; slot < (pool + 1) * classCount; slot++) {
            if (cache.sizes[slot] > 0) {
                arena.put(cache.stacks[slot], 0, cache.sizes[slot]);
                cache.sizes[slot] = 0;
            }
        }
    }

    /**
     * Returns the cached buffers of {@code pool} held by exited threads, and retires caches that
     * are then empty. A thread's exit happens-before {@code isAlive()} returning false, so its
     * cache may be read here; each pool's stacks are emptied under that pool's lock.
     */
    void sweepExitedThreads(int pool) {
        List<ThreadCache> exited = new ArrayList<>();
        synchronized (caches) {
            for (ThreadCache cache : caches) {
                if (!cache.owner.isAlive()) {
                    exited.add(cache);
                }
            }
        }
        if (exited.isEmpty()) {
            return;
        }
        PoolArena arena = pools[pool];
        arena.lock.lock();
        try {
            for (ThreadCache cache : exited) {
                flush(cache, pool);
            }
        } finally {
            arena.lock.unlock();
        }
        synchronized (caches) {
            for (ThreadCache cache : exited) {
                boolean empty = true;
                for (int size : cache.sizes) {
                    empty &= size == 0;
                }
                if (empty && caches.remove(cache)) {
                    for (int p = 0; p < retiredBytes.length; p++) {
                        retiredBytes[p] += cache.bytesInUse[p];
                        retiredBuffers[p] += cache.buffersInUse[p];
                    }
                    retiredHits += cache.hits;
                    retiredMisses += cache.misses;
                }
            }
        }
    }

    /**
     * Adds the counters of every cache, retired or not, to {@code bytes} and {@code buffers} (per
     * pool) and to {@code lookups} (hits, then misses).
     */
    void sum(long[] bytes, long[] buffers, long[] lookups) {
        synchronized (caches) {
            lookups[0] += retiredHits;
            lookups[1] += retiredMisses;
            for (int p = 0; p < bytes.length; p++) {
                bytes[p] += retiredBytes[p];
                buffers[p] += retiredBuffers[p];
            }
            for (ThreadCache cache : caches) {
                lookups[0] += cache.hits;
                lookups[1] += cache.misses;
                for (int p = 0; p < bytes.length; p++) {
                    bytes[p] += cache.bytesInUse[p];
                    buffers[p] += cache.buffersInUse[p];
                }
            }
        }
    }

    /** Forgets every cache, for a closed allocator. */
    void clear() {
        synchronized (caches) {
            caches.clear();
        }
    }
}
