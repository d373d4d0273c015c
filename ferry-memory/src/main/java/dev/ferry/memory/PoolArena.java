package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The shared state of one pool: its slabs, the runs of each size class that still have free
 * slots, and its quota. Thread caches come here, under the lock, only in batches.
 *
 * <p>Within a class, runs with free slots are kept in a queue: slots are taken from the run at
 * the head, and a run that gets a slot back joins at the tail. The head run fills up while the
 * others drain. A run whose slots all came back keeps them (and their buffer objects) until the
 * slabs are full: then every such run gives its pages back before the pool grows, so memory moves
 * between classes as the mix of sizes shifts. Where buffers are allocated on one thread and freed
 * on another, a class's runs empty and fill in turn; a run given back at once would be carved
 * again, with new buffer objects, moments later.
 *
 * <p>The quota bounds the pool's slabs plus its large buffers in use. Slabs are registered once
 * to be used for the life of the process: one is given back before the allocator closes only when
 * no run uses it and a large buffer needs its share of the quota.
 */
final class PoolArena {

    /** The runs of one class with slots left. */
    private static final class ClassRuns {
        final ArrayDeque<Run> runs = new ArrayDeque<>();
    }

    final RegisteredAllocator allocator;
    final PoolKind kind;
    final long quota;
    final ReentrantLock lock = new ReentrantLock();
    /** Signalled when memory comes back while someone waits for it. */
    private final Condition released = lock.newCondition();
    /** Threads blocked in allocate: while non-zero, releases bypass (and empty) thread caches and signal. */
    volatile int waiters;
    private final ClassRuns[] classes;
    private final List<Slab> slabs = new ArrayList<>();
    private final long slabBytesWanted;
    // Guarded by lock.
    private long slabBytes;
    private long largeBytes;
    private long largeBuffers;

    /**
     * Whether slabs and large buffers of 2 MiB or more are mapped for huge pages ({@link
     * HugePageMemory}); {@code -Dferry.memory.hugePages=false} takes the arena's allocation.
     */
    static final boolean HUGE_PAGES =
            Boolean.parseBoolean(System.getProperty("ferry.memory.hugePages", "true")) && HugePageMemory.available();

    /** Zeroed memory for a slab or a large buffer, freed when {@code arena} closes. */
    static MemorySegment memory(Arena arena, long size, long alignment) {
        return HUGE_PAGES ? HugePageMemory.allocate(arena, size, alignment) : arena.allocate(size, alignment);
    }

    /** A shared slab, or null (logged) where the system refuses one: the slab is private then. */
    private static SharedMemory.Region sharedMemory(Arena arena, String name, long size) {
        try {
            return SharedMemory.create(arena, name, size, SizeClasses.SLAB_ALIGNMENT);
        } catch (java.io.IOException e) {
            System.getLogger("dev.ferry.memory").log(System.Logger.Level.WARNING,
                    "slab " + name + " not shared (its messages go through the provider): " + e.getMessage());
            return null;
        }
    }

    PoolArena(RegisteredAllocator allocator, PoolKind kind, long quota, int classCount, long slabBytes) {
        this.allocator = allocator;
        this.kind = kind;
        this.quota = quota;
        this.slabBytesWanted = slabBytes;
        this.classes = new ClassRuns[classCount];
        for (int i = 0; i < classCount; i++) {
            classes[i] = new ClassRuns();
        }
    }

    /** Moves up to {@code max} free buffers of class {@code classIndex} into {@code dst}; returns how many. */
    int take(int classIndex, RegisteredBuffer[] dst, int max) {
        lock.lock();
        try {
            ArrayDeque<Run> runs = classes[classIndex].runs;
            int n = 0;
            while (n < max) {
                Run run = runs.peekFirst();
                if (run == null) {
                    run = newRun(classIndex);
                    if (run == null) {
                        break;
                    }
                    run.available = true;
                    runs.addFirst(run);
                }
                while (n < max && run.hasSlots()) {
                    dst[n++] = run.take();
                }
                if (!run.hasSlots()) {
                    runs.pollFirst();
                    run.available = false;
                }
            }
            return n;
        } finally {
            lock.unlock();
        }
    }

    /** Returns {@code src[from, to)} to their runs and clears those entries. */
    void put(RegisteredBuffer[] src, int from, int to) {
        lock.lock();
        try {
            for (int i = from; i < to; i++) {
                putLocked(src[i]);
                src[i] = null;
            }
            if (waiters != 0) {
                released.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    void put(RegisteredBuffer buffer) {
        lock.lock();
        try {
            putLocked(buffer);
            if (waiters != 0) {
                released.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    private void putLocked(RegisteredBuffer buffer) {
        Run run = buffer.run;
        run.put(buffer);
        ArrayDeque<Run> runs = classes[run.classIndex].runs;
        if (!run.available) {
            run.available = true;
            runs.addLast(run);
        }
    }

    /** Disposes every run no slot of which is out, in every class (the caller holds the lock). */
    private void disposeUnusedRuns() {
        for (var sizeClass : classes) {
            sizeClass.runs.removeIf(PoolArena::disposedIfUnused);
        }
    }

    /** Disposes one run no slot of which is out, of any class; false if there is none (the caller holds the lock). */
    private boolean disposeOneUnusedRun() {
        for (var sizeClass : classes) {
            for (var it = sizeClass.runs.iterator(); it.hasNext(); ) {
                if (disposedIfUnused(it.next())) {
                    it.remove();
                    return true;
                }
            }
        }
        return false;
    }

    /** Gives {@code run}'s pages back to its slab if none of its slots is out; whether it did (the caller unlists it). */
    private static boolean disposedIfUnused(Run run) {
        if (!run.unused()) {
            return false;
        }
        run.available = false;
        run.dispose();
        run.slab.free(run.page, run.order);
        return true;
    }

    /** Counts a large buffer against the quota; false when it does not fit. */
    boolean reserveLarge(long bytes) {
        lock.lock();
        try {
            if (slabBytes + largeBytes + bytes > quota) {
                reclaimUnusedSlabs(slabBytes + largeBytes + bytes - quota);
            }
            if (slabBytes + largeBytes + bytes > quota) {
                return false;
            }
            largeBytes += bytes;
            largeBuffers++;
            return true;
        } finally {
            lock.unlock();
        }
    }

    void releaseLarge(long bytes) {
        lock.lock();
        try {
            largeBytes -= bytes;
            largeBuffers--;
            if (waiters != 0) {
                released.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Waits for a release; the caller holds the lock. */
    void awaitRelease(long nanos) throws InterruptedException {
        released.await(nanos, TimeUnit.NANOSECONDS);
    }

    private Run newRun(int classIndex) {
        long runBytes = SizeClasses.runBytes(SizeClasses.size(classIndex));
        int order = Long.numberOfTrailingZeros(runBytes >>> SizeClasses.PAGE_SHIFT);
        // The slabs full, unused runs (of any class) give their pages back one at a time until
        // one run of this order fits, before the pool grows.
        do {
            for (Slab slab : slabs) {
                int page = slab.allocate(order);
                if (page >= 0) {
                    return new Run(this, slab, page, order, classIndex);
                }
            }
        } while (disposeOneUnusedRun());
        long room = quota - slabBytes - largeBytes;
        long size = Math.min(slabBytesWanted, room <= 0 ? 0 : Long.highestOneBit(room));
        if (size < runBytes) {
            return null;
        }
        Slab slab = newSlab(size);
        return new Run(this, slab, slab.allocate(order), order, classIndex);
    }

    private Slab newSlab(long size) {
        Arena arena = Arena.ofShared();
        Slab slab;
        try {
            int index = allocator.nextSlabIndex();
            SharedMemory.Region shared = kind == PoolKind.SEND && allocator.sharesSendPool()
                    ? sharedMemory(arena, allocator.sharedName(index), size) : null;
            MemorySegment segment = shared != null ? shared.segment() : memory(arena, size, SizeClasses.SLAB_ALIGNMENT);
            slab = new Slab(index, arena, segment, allocator.registrar.register(segment), shared);
        } catch (RuntimeException | Error e) {
            arena.close();
            throw e;
        }
        slabs.add(slab);
        slabBytes += size;
        return slab;
    }

    /**
     * Gives back slabs that no run uses any more, until {@code needed} bytes of quota are free:
     * small buffers that came and went must not keep a large request out for ever. The caller
     * holds the lock.
     */
    private void reclaimUnusedSlabs(long needed) {
        disposeUnusedRuns();
        long freed = 0;
        for (var it = slabs.iterator(); it.hasNext() && freed < needed; ) {
            Slab slab = it.next();
            if (slab.unused()) {
                it.remove();
                slabBytes -= slab.segment.byteSize();
                freed += slab.segment.byteSize();
                slab.close();
            }
        }
    }

    /** Counters for statistics: slabs, slab bytes, large bytes, large buffers. */
    long[] snapshot() {
        lock.lock();
        try {
            return new long[] {slabs.size(), slabBytes, largeBytes, largeBuffers};
        } finally {
            lock.unlock();
        }
    }

    /** Deregisters and frees every slab. */
    void close() {
        lock.lock();
        try {
            RuntimeException failure = null;
            for (Slab slab : slabs) {
                try {
                    slab.close();
                } catch (RuntimeException e) {
                    if (failure == null) {
                        failure = e;
                    } else {
                        failure.addSuppressed(e);
                    }
                }
            }
            slabs.clear();
            for (ClassRuns c : classes) {
                c.runs.clear();
            }
            if (waiters != 0) {
                released.signalAll();
            }
            if (failure != null) {
                throw failure;
            }
        } finally {
            lock.unlock();
        }
    }
}
