package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;

/**
 * A bounded cache of registrations, so that memory transferred again and again is registered
 * once.
 *
 * <p>Two kinds of entries: memory of the caller, looked up by address and length
 * ({@link #register}), and memory the cache allocates itself for the allocator's requests above
 * its largest size class, looked up by size. Entries in use are never evicted. Idle entries sit
 * in one LRU list; whenever idle entries push the cache past its caps (in bytes or in entries,
 * counting all entries), the least recently used are deregistered, and owned memory is freed.
 *
 * <p>Caller memory is matched on address, length and {@linkplain MemorySegment#scope() scope}:
 * memory freed and reallocated at the same address is a new scope, so a stale registration is
 * dropped instead of handed out. Registration happens under the cache's lock: misses are
 * serialized, hits are a map lookup.
 */
public final class RegistrationCache implements AutoCloseable {

    private record Range(long address, long length) {
    }

    private final MemoryRegistrar registrar;
    private final long maxBytes;
    private final int maxEntries;
    private final Object lock = new Object();
    private final Map<Range, CachedRegistration> byRange = new HashMap<>();
    private final Map<Long, ArrayDeque<CachedRegistration>> idleOwned = new HashMap<>();
    /** Idle entries, least recently used first. */
    private final LinkedHashSet<CachedRegistration> idle = new LinkedHashSet<>();
    /** Owned entries in use, so that close can free them. */
    private final LinkedHashSet<CachedRegistration> outOwned = new LinkedHashSet<>();
    private Consumer<CachedRegistration> onEvict = entry -> { };
    private long bytes;
    private int entries;
    private long hits;
    private long misses;
    private long evictions;
    private boolean closed;

    /**
     * A cache over {@code registrar} keeping at most {@code maxBytes} and {@code maxEntries}
     * registrations, as far as idle ones can be evicted.
     */
    public RegistrationCache(MemoryRegistrar registrar, long maxBytes, int maxEntries) {
        this.registrar = Objects.requireNonNull(registrar, "registrar");
        this.maxBytes = maxBytes;
        this.maxEntries = maxEntries;
    }

    /**
     * The registration of {@code segment}: a cached one for the same address, length and scope,
     * or a new one. Close the result when done with the memory.
     */
    public CachedRegistration register(MemorySegment segment) {
        Range range = new Range(segment.address(), segment.byteSize());
        synchronized (lock) {
            checkOpen();
            CachedRegistration entry = byRange.get(range);
            if (entry != null) {
                if (entry.segment().scope().isAlive() && entry.segment().scope().equals(segment.scope())) {
                    hits++;
                    if (entry.uses++ == 0) {
                        idle.remove(entry);
                    }
                    return entry;
                }
                byRange.remove(range);
                drop(entry);
            }
            misses++;
            entry = new CachedRegistration(this, segment, registrar.register(segment), null);
            entry.uses = 1;
            byRange.put(range, entry);
            add(entry);
            return entry;
        }
    }

    /** Lookups answered from the cache. */
    public long hits() {
        synchronized (lock) {
            return hits;
        }
    }

    /** Lookups that registered. */
    public long misses() {
        synchronized (lock) {
            return misses;
        }
    }

    /** Entries deregistered to stay within the caps. */
    public long evictions() {
        synchronized (lock) {
            return evictions;
        }
    }

    /** Bytes registered by the entries in the cache. */
    public long bytes() {
        synchronized (lock) {
            return bytes;
        }
    }

    /** Entries in the cache, in use or idle. */
    public int entries() {
        synchronized (lock) {
            return entries;
        }
    }

    /** Deregisters every entry, in use or not, and frees owned memory. */
    @Override
    public void close() {
        List<CachedRegistration> all;
        synchronized (lock) {
            if (closed) {
                return;
            }
            closed = true;
            all = new ArrayList<>(byRange.values());
            for (ArrayDeque<CachedRegistration> queue : idleOwned.values()) {
                all.addAll(queue);
            }
            all.addAll(outOwned);
            byRange.clear();
            idleOwned.clear();
            outOwned.clear();
            idle.clear();
            bytes = 0;
            entries = 0;
        }
        for (CachedRegistration entry : all) {
            destroy(entry);
        }
    }

    void onEvict(Consumer<CachedRegistration> listener) {
        this.onEvict = listener;
    }

    /** An entry of {@code size} bytes of memory owned by the cache, idle or new, now in use. */
    CachedRegistration acquireOwned(long size) {
        synchronized (lock) {
            checkOpen();
            ArrayDeque<CachedRegistration> queue = idleOwned.get(size);
            CachedRegistration entry = queue == null ? null : queue.pollLast();
            if (entry != null) {
                hits++;
                idle.remove(entry);
            } else {
                misses++;
                Arena arena = Arena.ofShared();
                try {
                    long alignment = size >= SizeClasses.SLAB_ALIGNMENT ? SizeClasses.SLAB_ALIGNMENT : 4096;
                    MemorySegment segment = PoolArena.memory(arena, size, alignment);
                    entry = new CachedRegistration(this, segment, registrar.register(segment), arena);
                } catch (RuntimeException | Error e) {
                    arena.close();
                    throw e;
                }
                add(entry);
            }
            entry.uses = 1;
            outOwned.add(entry);
            return entry;
        }
    }

    void release(CachedRegistration entry) {
        CachedRegistration dropped = null;
        synchronized (lock) {
            if (entry.uses <= 0) {
                throw new IllegalStateException(entry + " closed more often than registered");
            }
            if (--entry.uses > 0) {
                return;
            }
            if (closed) {
                return;
            }
            if (!entry.cached) {
                dropped = entry;
            } else {
                if (entry.ownedArena != null) {
                    outOwned.remove(entry);
                    idleOwned.computeIfAbsent(entry.segment().byteSize(), s -> new ArrayDeque<>()).addLast(entry);
                }
                idle.add(entry);
                trim();
            }
        }
        if (dropped != null) {
            destroy(dropped);
        }
    }

    private void add(CachedRegistration entry) {
        bytes += entry.segment().byteSize();
        entries++;
        trim();
    }

    private void trim() {
        while ((bytes > maxBytes || entries > maxEntries) && !idle.isEmpty()) {
            CachedRegistration victim = idle.iterator().next();
            evictions++;
            if (victim.ownedArena == null) {
                byRange.remove(new Range(victim.segment().address(), victim.segment().byteSize()));
            } else {
                idleOwned.get(victim.segment().byteSize()).remove(victim);
            }
            drop(victim);
        }
    }

    /** Takes {@code entry} out of the cache; it is destroyed now if idle, else on its last close. */
    private void drop(CachedRegistration entry) {
        entry.cached = false;
        bytes -= entry.segment().byteSize();
        entries--;
        if (entry.uses == 0) {
            idle.remove(entry);
            destroy(entry);
        }
    }

    private void destroy(CachedRegistration entry) {
        entry.cached = false;
        try {
            onEvict.accept(entry);
            entry.registration.close();
        } finally {
            if (entry.ownedArena != null) {
                entry.ownedArena.close();
            }
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("registration cache closed");
        }
    }
}
