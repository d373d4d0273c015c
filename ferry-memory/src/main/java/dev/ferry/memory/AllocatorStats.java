package dev.ferry.memory;

import java.util.List;

/**
 * A snapshot of an allocator's counters. Counters kept per thread are read without stopping
 * the threads, so a snapshot taken under load is approximate.
 *
 * @param slabs                     registered slabs, all pools
 * @param slabBytes                 bytes of those slabs
 * @param registrations             live registrations: slabs plus registration cache entries
 * @param registeredBytes           bytes under those registrations
 * @param registrationCacheHits     large allocations and lookups served by a cached registration
 * @param registrationCacheMisses   those that had to register
 * @param registrationCacheEvictions cached registrations deregistered to stay within the caps
 * @param threadCacheHits           size-class allocations served by the thread's own cache
 * @param threadCacheMisses         those that went to the pool (under its lock)
 * @param leaks                     leaked buffers reported so far
 * @param pools                     per pool, in {@link PoolKind} order
 */
public record AllocatorStats(
        long slabs,
        long slabBytes,
        long registrations,
        long registeredBytes,
        long registrationCacheHits,
        long registrationCacheMisses,
        long registrationCacheEvictions,
        long threadCacheHits,
        long threadCacheMisses,
        long leaks,
        List<PoolStats> pools) {

    /**
     * One pool.
     *
     * @param pool          which one
     * @param quota         its quota in bytes
     * @param reservedBytes bytes counted against the quota: its slabs and its large buffers in use
     * @param bytesInUse    capacity of its buffers handed out and not yet released
     * @param buffersInUse  number of those buffers
     * @param slabs         its slabs
     */
    public record PoolStats(PoolKind pool, long quota, long reservedBytes, long bytesInUse, long buffersInUse,
                            int slabs) {
    }

    /** The fraction of size-class allocations served by a thread cache (0 when none). */
    public double threadCacheHitRate() {
        long total = threadCacheHits + threadCacheMisses;
        return total == 0 ? 0 : (double) threadCacheHits / total;
    }

    /** The statistics of {@code kind}. */
    public PoolStats pool(PoolKind kind) {
        return pools.get(kind.ordinal());
    }

    /** Buffers in use over all pools. */
    public long buffersInUse() {
        return pools.stream().mapToLong(PoolStats::buffersInUse).sum();
    }
}
