package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The RDMA-aware allocator: hands out {@link RegisteredBuffer}s carved from large registered
 * slabs, so memory is registered once per slab and never per buffer.
 *
 * <pre>
 *  tryAllocate(pool, size)
 *     |  size &lt;= maxClassBytes                          size &gt; maxClassBytes
 *     v                                                       v
 *  thread cache [pool][class]  -- empty: batch --&gt;  pool     registration cache
 *  (no lock)                   &lt;-- full: half ---  (lock)   (own registration, reused
 *                                                   |         for the same size, LRU)
 *                                        runs of a class, cut from
 *                                        slabs by a buddy allocator;
 *                                        new slab while the quota allows
 * </pre>
 *
 * <p>Each {@link PoolKind} has its own slabs and quota, so one pool running dry never takes
 * memory from another. When a pool is exhausted {@link #tryAllocate} returns {@code null}: that
 * is back-pressure, not an error, and {@link #allocate(PoolKind, long, Duration)} waits for a
 * release instead. A waiting thread first gives back what its own cache and exited threads'
 * caches hold of the pool; while it waits, a release into that pool skips the thread caches,
 * empties the releasing thread's cache of that pool (its owner does it, as it alone may), and
 * wakes the waiter, so that a slab kept in use only by cached buffers can be reclaimed for a
 * large buffer. Buffers parked in the cache of a live thread that releases nothing while
 * another waits stay there: size the quotas with that slack in mind
 * ({@link AllocatorConfig#threadCacheBytesPerClass()} per class per thread).
 *
 * <p>Any thread may release any buffer. A thread's cache is returned to the pools when the
 * thread has exited and the allocator next needs memory or a new thread starts using it.
 *
 * <p>{@link #close()} deregisters every registration and frees every slab. It is meant for a
 * quiescent allocator: if buffers are still in use it frees and deregisters all the same (a
 * later access through their segments fails with {@link IllegalStateException}) and then throws
 * {@link IllegalStateException} naming how many were in use and, where recorded, where they were
 * allocated.
 */
public final class RegisteredAllocator implements AutoCloseable {

    final MemoryRegistrar registrar;
    final LeakDetector detector;
    private final AllocatorConfig config;
    private final PoolArena[] pools;
    private final int classCount;
    private final int maxClassBytes;
    private final boolean paranoid;
    private final RegistrationCache registrationCache;
    private final ThreadLocal<ThreadCache> threadCaches = ThreadLocal.withInitial(this::newThreadCache);
    /** Every thread cache not yet retired, and the counters of the retired ones. */
    private final ThreadCaches allCaches;
    private final AtomicInteger slabIndex = new AtomicInteger();
    private volatile boolean closed;
    /** Names this allocator's shared slabs ({@code ferry-<random>-<slab index>}); null when none are shared. */
    private final String sharedPrefix;
    /** An empty shared file a peer opens once to learn that it can open this process's slabs. */
    private final SharedMemory.Region probe;
    private final Arena probeArena;

    /** An allocator with {@link AllocatorConfig#defaults()}. */
    public RegisteredAllocator(MemoryRegistrar registrar) {
        this(registrar, AllocatorConfig.defaults());
    }

    /** An allocator registering its memory through {@code registrar}. */
    public RegisteredAllocator(MemoryRegistrar registrar, AllocatorConfig config) {
        this.registrar = Objects.requireNonNull(registrar, "registrar");
        this.config = Objects.requireNonNull(config, "config");
        this.detector = new LeakDetector(config.leakDetection(), config.leakSampleInterval(), config.leakListener());
        this.paranoid = config.leakDetection() == LeakDetection.PARANOID;
        this.maxClassBytes = config.maxClassBytes();
        this.classCount = SizeClasses.count(maxClassBytes);
        PoolKind[] kinds = PoolKind.values();
        this.pools = new PoolArena[kinds.length];
        for (PoolKind kind : kinds) {
            pools[kind.ordinal()] = new PoolArena(this, kind, config.quota(kind), classCount, config.slabBytes());
        }
        this.allCaches = new ThreadCaches(pools, classCount);
        SharedMemory.Region sharedProbe = null;
        Arena sharedArena = null;
        if (config.shareSendPool() && SharedMemory.available()) {
            String prefix = "ferry-" + Long.toHexString(new java.security.SecureRandom().nextLong() | 1L << 63);
            sharedArena = Arena.ofShared();
            try {
                sharedProbe = SharedMemory.create(sharedArena, prefix + "-probe", 4096, 4096);
            } catch (java.io.IOException e) {
                sharedArena.close();
                sharedArena = null;
                System.getLogger("dev.ferry.memory").log(System.Logger.Level.INFO,
                        "send pool not shared with peers on this host: " + e.getMessage());
            }
        }
        this.probe = sharedProbe;
        this.probeArena = sharedArena;
        this.sharedPrefix = sharedProbe == null ? null : sharedProbe.name().substring(0, sharedProbe.name().length() - "-probe".length());
        this.registrationCache = new RegistrationCache(registrar, config.registrationCacheBytes(),
                config.registrationCacheEntries());
        registrationCache.onEvict(entry -> {
            if (entry.buffer != null) {
                detector.forget(entry.buffer);
            }
        });
    }

    /** This allocator's configuration. */
    public AllocatorConfig config() {
        return config;
    }

    /**
     * Whether the send pool's slabs are {@link SharedMemory} a peer on this host may map
     * ({@link AllocatorConfig#shareSendPool()}, where the system can): see {@link RegisteredBuffer#sharedFd()}.
     */
    public boolean sharesSendPool() {
        return sharedPrefix != null;
    }

    /** The name of shared slab {@code slabIndex}: what a peer checks before it maps the slab. */
    public String sharedName(int slabIndex) {
        return sharedName(sharedPrefix, slabIndex);
    }

    /** The name of shared slab {@code slabIndex} of the allocator whose names start with {@code prefix}. */
    public static String sharedName(String prefix, int slabIndex) {
        return prefix + "-" + slabIndex;
    }

    /** What names this allocator's shared slabs start with, or null when they are not shared. */
    public String sharedPrefix() {
        return sharedPrefix;
    }

    /**
     * The descriptor of an empty shared file named {@code sharedPrefix() + "-probe"}, which a peer
     * opens once ({@link SharedMemory#probe}) to learn that it may open this process's slabs; -1
     * when they are not shared.
     */
    public int sharedProbeFd() {
        return probe == null ? -1 : probe.fd();
    }

    /**
     * The cache that buffers above the largest size class are registered through. Application
     * memory sent without copying (rendezvous) can be registered here too, sharing its caps.
     */
    public RegistrationCache registrationCache() {
        return registrationCache;
    }

    /**
     * A buffer of at least {@code size} bytes from {@code pool}, or {@code null} when the pool is
     * exhausted (back-pressure: retry after a release, or use
     * {@link #allocate(PoolKind, long, Duration)}).
     *
     * @throws IllegalStateException if the allocator is closed
     */
    public RegisteredBuffer tryAllocate(PoolKind pool, long size) {
        if (size <= maxClassBytes && size >= 0) {
            return allocateSmall(pool.ordinal(), (int) size);
        }
        if (size < 0) {
            throw new IllegalArgumentException("negative size: " + size);
        }
        return allocateLarge(pool, size);
    }

    /**
     * A buffer of at least {@code size} bytes from {@code pool}, waiting up to {@code timeout} for
     * a release when the pool is exhausted.
     *
     * @throws PoolExhaustedException if the pool still has no room after {@code timeout}
     * @throws InterruptedException   if interrupted while waiting
     */
    public RegisteredBuffer allocate(PoolKind pool, long size, Duration timeout) throws InterruptedException {
        RegisteredBuffer buffer = tryAllocate(pool, size);
        if (buffer != null) {
            return buffer;
        }
        long deadline = System.nanoTime() + timeout.toNanos();
        PoolArena arena = pools[pool.ordinal()];
        // This thread's cache exists before the lock is taken: making one sweeps every pool.
        ThreadCache cache = threadCaches.get();
        // The buffers this thread and exited ones cached may be all that holds a slab the request
        // needs (a large buffer's quota): they go back before the wait. Other live threads give
        // theirs back at their next release while this one waits (free).
        allCaches.flush(cache, pool.ordinal());
        allCaches.sweepExitedThreads(pool.ordinal());
        arena.lock.lock();
        try {
            arena.waiters++;
            try {
                for (;;) {
                    buffer = tryAllocate(pool, size);
                    if (buffer != null) {
                        return buffer;
                    }
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        throw exhausted(pool, size, timeout);
                    }
                    arena.awaitRelease(left);
                }
            } finally {
                arena.waiters--;
            }
        } finally {
            arena.lock.unlock();
        }
    }

    // The fast path: a thread-local lookup, a pop from an array stack, the buffer's state store.
    private RegisteredBuffer allocateSmall(int pool, int size) {
        ThreadCache cache = threadCaches.get();
        if (closed) {
            throw closedException();
        }
        int classIndex = SizeClasses.index(size);
        int slot = pool * classCount + classIndex;
        int n = cache.sizes[slot];
        RegisteredBuffer buffer;
        if (n > 0) {
            RegisteredBuffer[] stack = cache.stacks[slot];
            buffer = stack[--n];
            stack[n] = null;
            cache.sizes[slot] = n;
            cache.hits++;
        } else {
            buffer = refill(cache, pool, classIndex, slot);
            if (buffer == null) {
                return null;
            }
        }
        cache.bytesInUse[pool] += SizeClasses.size(classIndex);
        cache.buffersInUse[pool]++;
        buffer.allocated();
        LeakDetector.Sentinel sentinel = buffer.sentinel;
        if (sentinel != null) {
            track(cache, sentinel);
        }
        return buffer;
    }

    private void track(ThreadCache cache, LeakDetector.Sentinel sentinel) {
        sentinel.live = true;
        if (paranoid || --cache.sampleCountdown <= 0) {
            cache.sampleCountdown = detector.sampleInterval;
            sentinel.site = new Throwable("buffer allocated here");
        }
    }

    private RegisteredBuffer refill(ThreadCache cache, int pool, int classIndex, int slot) {
        cache.misses++;
        detector.poll();
        PoolArena arena = pools[pool];
        RegisteredBuffer[] stack = cache.stacks[slot];
        if (stack.length == 0) {
            RegisteredBuffer[] one = new RegisteredBuffer[1];
            if (arena.take(classIndex, one, 1) == 0 && reclaim(cache, pool, classIndex, one, 1) == 0) {
                return null;
            }
            return one[0];
        }
        int batch = Math.max(1, stack.length >>> 1);
        int got = arena.take(classIndex, stack, batch);
        if (got == 0) {
            got = reclaim(cache, pool, classIndex, stack, batch);
            if (got == 0) {
                return null;
            }
        }
        RegisteredBuffer buffer = stack[--got];
        stack[got] = null;
        cache.sizes[slot] = got;
        return buffer;
    }

    /**
     * The pool is out of memory for this class: return this thread's cached buffers of the pool
     * (their runs may then free pages for this class) and those of exited threads, and try again.
     */
    private int reclaim(ThreadCache cache, int pool, int classIndex, RegisteredBuffer[] dst, int max) {
        allCaches.flush(cache, pool);
        allCaches.sweepExitedThreads(pool);
        return pools[pool].take(classIndex, dst, max);
    }

    /** The arena of {@code pool}; for tests. */
    PoolArena arena(PoolKind pool) {
        return pools[pool.ordinal()];
    }

    /** Called by the last {@link RegisteredBuffer#release()} of a root buffer. */
    void free(RegisteredBuffer buffer) {
        LeakDetector.Sentinel sentinel = buffer.sentinel;
        if (sentinel != null) {
            sentinel.live = false;
            sentinel.site = null;
        }
        if (closed) {
            return;
        }
        Run run = buffer.run;
        if (run == null) {
            freeLarge(buffer);
            return;
        }
        PoolArena arena = run.pool;
        int pool = arena.kind.ordinal();
        ThreadCache cache = threadCaches.get();
        cache.bytesInUse[pool] -= run.slotBytes;
        cache.buffersInUse[pool]--;
        RegisteredBuffer next = paranoid ? buffer.successor(detector) : buffer;
        if (arena.waiters != 0) {
            // Someone waits for room: this buffer and all this thread cached of the pool go back,
            // so that a slab they alone kept in use can be reclaimed for the waiter.
            arena.put(next);
            allCaches.flush(cache, pool);
            return;
        }
        int slot = pool * classCount + run.classIndex;
        RegisteredBuffer[] stack = cache.stacks[slot];
        int n = cache.sizes[slot];
        if (n == stack.length) {
            if (n == 0) {
                arena.put(next);
                return;
            }
            // Give back the older half; the recent half is warmer in the CPU caches.
            int half = (n + 1) >>> 1;
            arena.put(stack, 0, half);
            System.arraycopy(stack, half, stack, 0, n - half);
            for (int i = n - half; i < n; i++) {
                stack[i] = null;
            }
            n -= half;
        }
        stack[n] = next;
        cache.sizes[slot] = n + 1;
    }

    private RegisteredBuffer allocateLarge(PoolKind pool, long size) {
        if (closed) {
            throw closedException();
        }
        long bytes = SizeClasses.largeBytes(size);
        PoolArena arena = pools[pool.ordinal()];
        if (!arena.reserveLarge(bytes)) {
            return null;
        }
        CachedRegistration entry;
        try {
            entry = registrationCache.acquireOwned(bytes);
        } catch (RuntimeException | Error e) {
            arena.releaseLarge(bytes);
            throw e;
        }
        RegisteredBuffer buffer = entry.buffer;
        entry.buffer = null;
        if (buffer == null) {
            buffer = new RegisteredBuffer(entry, detector);
        }
        buffer.pool = arena;
        buffer.allocated();
        LeakDetector.Sentinel sentinel = buffer.sentinel;
        if (sentinel != null) {
            sentinel.pool = pool;
            track(threadCaches.get(), sentinel);
        }
        return buffer;
    }

    private void freeLarge(RegisteredBuffer buffer) {
        CachedRegistration entry = buffer.entry;
        PoolArena arena = buffer.pool;
        entry.buffer = paranoid ? buffer.successor(detector) : buffer;
        long bytes = entry.segment().byteSize();
        entry.close();
        arena.releaseLarge(bytes);
    }

    private ThreadCache newThreadCache() {
        ThreadCache cache = new ThreadCache(Thread.currentThread(), classCount, config.threadCacheBytesPerClass(),
                config.threadCacheMaxBuffers(), config.leakSampleInterval());
        allCaches.add(cache);
        if (!closed) {
            for (int pool = 0; pool < pools.length; pool++) {
                allCaches.sweepExitedThreads(pool);
            }
        }
        return cache;
    }

    /** Reports leaked buffers found so far to the leak listener; returns how many. */
    public int reportLeaks() {
        return detector.poll();
    }

    /** A snapshot of the counters. */
    public AllocatorStats stats() {
        int kinds = pools.length;
        long[] bytes = new long[kinds];
        long[] buffers = new long[kinds];
        long[] lookups = new long[2];
        allCaches.sum(bytes, buffers, lookups);
        long hits = lookups[0];
        long misses = lookups[1];
        long slabs = 0;
        long slabBytes = 0;
        List<AllocatorStats.PoolStats> poolStats = new ArrayList<>(kinds);
        for (PoolArena arena : pools) {
            long[] s = arena.snapshot();
            int p = arena.kind.ordinal();
            slabs += s[0];
            slabBytes += s[1];
            poolStats.add(new AllocatorStats.PoolStats(arena.kind, arena.quota, s[1] + s[2], bytes[p] + s[2],
                    buffers[p] + s[3], (int) s[0]));
        }
        RegistrationCache rc = registrationCache;
        return new AllocatorStats(slabs, slabBytes, slabs + rc.entries(), slabBytes + rc.bytes(), rc.hits(),
                rc.misses(), rc.evictions(), hits, misses, detector.leaks(), List.copyOf(poolStats));
    }

    /**
     * Deregisters every registration and frees every slab; see the class comment for buffers
     * still in use.
     *
     * @throws IllegalStateException if buffers were still in use (after freeing everything)
     */
    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        detector.poll();
        AllocatorStats stats = stats();
        List<String> outstanding = detector.outstanding(4);
        RuntimeException failure = null;
        for (PoolArena arena : pools) {
            try {
                arena.close();
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        registrationCache.close();
        if (probeArena != null) {
            probeArena.close();
        }
        detector.clear();
        allCaches.clear();
        threadCaches.remove();
        if (failure != null) {
            throw failure;
        }
        long inUse = stats.buffersInUse();
        if (inUse > 0) {
            StringBuilder message = new StringBuilder("allocator closed with ").append(inUse)
                    .append(" buffers in use (");
            for (AllocatorStats.PoolStats pool : stats.pools()) {
                message.append(pool.pool()).append(' ').append(pool.buffersInUse()).append(", ");
            }
            message.setLength(message.length() - 2);
            message.append("); their memory is now deregistered and freed");
            for (String site : outstanding) {
                message.append("\n").append(site);
            }
            throw new IllegalStateException(message.toString());
        }
    }

    int nextSlabIndex() {
        return slabIndex.getAndIncrement();
    }

    private PoolExhaustedException exhausted(PoolKind pool, long size, Duration timeout) {
        AllocatorStats.PoolStats stats = stats().pool(pool);
        return new PoolExhaustedException(pool, pool + " pool exhausted: no buffer of " + size + " bytes within "
                + timeout + "; quota " + stats.quota() + " B, reserved " + stats.reservedBytes() + " B in "
                + stats.slabs() + " slabs and large buffers, " + stats.bytesInUse() + " B in use by "
                + stats.buffersInUse() + " buffers; buffers cached by other live threads return when those"
                + " threads allocate, release or exit");
    }

    private static IllegalStateException closedException() {
        return new IllegalStateException("allocator closed");
    }
}
