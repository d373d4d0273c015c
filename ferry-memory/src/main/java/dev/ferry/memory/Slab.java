package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.BitSet;

/**
 * One registered slab of a pool, and the buddy allocator that hands out its pages as runs.
 *
 * <p>{@code free[k]} marks the first page of every free block of {@code 2^k} pages. A request
 * for order {@code k} takes the smallest free block of order {@code >= k} and splits it, each
 * split leaving its upper half free one order down. A freed block merges with its buddy (the
 * block whose first page differs in bit {@code k}) while the buddy is free, so a slab whose runs
 * all came back is one free block again. Slabs hold at most a few hundred pages, so finding a
 * free block is a scan of a few words. Guarded by the pool's lock.
 */
final class Slab {

    final int index;
    final Arena arena;
    final MemorySegment segment;
    final MemoryRegistrar.Registration registration;
    final long descriptor;
    final long key;
    /** The shared file behind this slab's memory, or null: {@link RegisteredBuffer#sharedFd()}. */
    final SharedMemory.Region shared;
    private final int maxOrder;
    private final BitSet[] free;
    private int freePages;

    Slab(int index, Arena arena, MemorySegment segment, MemoryRegistrar.Registration registration) {
        this(index, arena, segment, registration, null);
    }

    Slab(int index, Arena arena, MemorySegment segment, MemoryRegistrar.Registration registration,
            SharedMemory.Region shared) {
        this.shared = shared;
        this.index = index;
        this.arena = arena;
        this.segment = segment;
        this.registration = registration;
        this.descriptor = registration.descriptor();
        this.key = registration.key();
        int pages = (int) (segment.byteSize() >>> SizeClasses.PAGE_SHIFT);
        this.maxOrder = Integer.numberOfTrailingZeros(pages);
        this.free = new BitSet[maxOrder + 1];
        for (int k = 0; k <= maxOrder; k++) {
            free[k] = new BitSet(pages >>> k);
        }
        free[maxOrder].set(0);
        freePages = pages;
    }

    /** The first page of a newly taken block of {@code 2^order} pages, or -1. */
    int allocate(int order) {
        for (int k = order; k <= maxOrder; k++) {
            int page = free[k].nextSetBit(0);
            if (page >= 0) {
                free[k].clear(page);
                while (k > order) {
                    k--;
                    free[k].set(page + (1 << k));
                }
                freePages -= 1 << order;
                return page;
            }
        }
        return -1;
    }

    /** Returns the block of {@code 2^order} pages at {@code page}, merging it with free buddies. */
    void free(int page, int order) {
        freePages += 1 << order;
        while (order < maxOrder) {
            int buddy = page ^ (1 << order);
            if (!free[order].get(buddy)) {
                break;
            }
            free[order].clear(buddy);
            page = Math.min(page, buddy);
            order++;
        }
        free[order].set(page);
    }

    /** Whether every page is free: no run lives in the slab. */
    boolean unused() {
        return freePages == (int) (segment.byteSize() >>> SizeClasses.PAGE_SHIFT);
    }

    int freePages() {
        return freePages;
    }

    /** Deregisters, then frees the memory. */
    void close() {
        try {
            registration.close();
        } finally {
            arena.close();
        }
    }
}
