package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * A registration held by a {@link RegistrationCache}. The same object is handed back for the
 * same memory while it stays cached; each {@link RegistrationCache#register} must be matched by
 * one {@link #close()}, which releases the use (the registration itself stays cached).
 */
public final class CachedRegistration implements AutoCloseable {

    private final RegistrationCache cache;
    private final MemorySegment segment;
    final MemoryRegistrar.Registration registration;
    private final long descriptor;
    private final long key;
    /** The arena of memory the cache allocated itself (large buffers); null for the caller's. */
    final Arena ownedArena;
    // Guarded by the cache's lock.
    int uses;
    boolean cached = true;
    /** The large buffer of an owned entry while the entry is idle; null while it is out. */
    RegisteredBuffer buffer;

    CachedRegistration(RegistrationCache cache, MemorySegment segment, MemoryRegistrar.Registration registration,
                       Arena ownedArena) {
        this.cache = cache;
        this.segment = segment;
        this.registration = registration;
        this.descriptor = registration.descriptor();
        this.key = registration.key();
        this.ownedArena = ownedArena;
    }

    /** The registered memory. */
    public MemorySegment segment() {
        return segment;
    }

    /** The local descriptor for libfabric data calls on this memory. */
    public long descriptor() {
        return descriptor;
    }

    /** The key a peer presents to read or write this memory remotely. */
    public long key() {
        return key;
    }

    /** The address a peer names to reach the byte at {@code offset} into {@link #segment()}. */
    public long remoteAddress(long offset) {
        return registration.remoteAddress(offset);
    }

    /** Releases one use; an entry no longer in use may be evicted and deregistered. */
    @Override
    public void close() {
        cache.release(this);
    }

    @Override
    public String toString() {
        return "CachedRegistration[@0x" + Long.toHexString(segment.address()) + " " + segment.byteSize() + " B]";
    }
}
