package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class RegistrationCacheTest {

    private static final int KIB = 1024;

    @Test
    void evictsTheLeastRecentlyUsedByCount() {
        CountingRegistrar registrar = new CountingRegistrar();
        try (Arena arena = Arena.ofConfined(); RegistrationCache cache = new RegistrationCache(registrar, 1L << 30, 2)) {
            MemorySegment a = arena.allocate(4 * KIB);
            MemorySegment b = arena.allocate(4 * KIB);
            MemorySegment c = arena.allocate(4 * KIB);
            cache.register(a).close();
            cache.register(b).close();
            cache.register(a).close(); // a is now more recent than b
            cache.register(c).close();
            assertEquals(3, registrar.registrations());
            assertEquals(1, registrar.closed(), "b evicted");
            assertEquals(2, cache.entries());
            assertEquals(1, cache.evictions());
            cache.register(a).close();
            assertEquals(2, cache.hits());
            cache.register(b).close();
            assertEquals(4, registrar.registrations(), "b registers again");
        }
        assertEquals(0, registrar.live(), "close deregisters the rest");
        assertEquals(0, registrar.closedTwice());
    }

    @Test
    void evictsTheLeastRecentlyUsedBySize() {
        CountingRegistrar registrar = new CountingRegistrar();
        try (Arena arena = Arena.ofConfined(); RegistrationCache cache = new RegistrationCache(registrar, 1024 * KIB, 100)) {
            MemorySegment a = arena.allocate(512 * KIB);
            MemorySegment b = arena.allocate(512 * KIB);
            MemorySegment c = arena.allocate(512 * KIB);
            cache.register(a).close();
            cache.register(b).close();
            assertEquals(0, registrar.closed());
            cache.register(c).close();
            assertEquals(1, registrar.closed());
            assertEquals(1024 * KIB, cache.bytes());
            assertEquals(1, registrar.all.getFirst().closes.get(), "a, the oldest, went first");
        }
        assertEquals(0, registrar.live());
    }

    @Test
    void aHitReturnsTheSameHandleAndEntriesInUseAreNotEvicted() {
        CountingRegistrar registrar = new CountingRegistrar();
        try (Arena arena = Arena.ofConfined(); RegistrationCache cache = new RegistrationCache(registrar, 1L << 30, 1)) {
            MemorySegment a = arena.allocate(8 * KIB);
            MemorySegment b = arena.allocate(8 * KIB);
            CachedRegistration first = cache.register(a);
            CachedRegistration again = cache.register(a);
            assertSame(first, again);
            assertEquals(a.address() + 5, first.remoteAddress(5));
            CachedRegistration other = cache.register(b);
            assertEquals(2, registrar.live(), "over the cap, but both are in use");
            first.close();
            assertEquals(2, registrar.live(), "a is still used once");
            again.close();
            assertEquals(1, registrar.live(), "a, idle and over the cap, is evicted");
            other.close();
            assertThrows(IllegalStateException.class, other::close);
        }
    }

    @Test
    void memoryFreedAndReallocatedAtTheSameAddressIsRegisteredAgain() {
        CountingRegistrar registrar = new CountingRegistrar();
        try (RegistrationCache cache = new RegistrationCache(registrar, 1L << 30, 10)) {
            Arena arena = Arena.ofConfined();
            MemorySegment old = arena.allocate(4 * KIB);
            CachedRegistration first = cache.register(old);
            first.close();
            arena.close();
            MemorySegment reused = MemorySegment.ofAddress(old.address()).reinterpret(4 * KIB);
            CachedRegistration second = cache.register(reused);
            assertNotSame(first, second);
            assertEquals(2, registrar.registrations());
            assertEquals(1, registrar.closed(), "the stale registration is dropped");
            second.close();
        }
    }

    @Test
    void largeBuffersReuseTheirRegistrationAndEvictedOnesAreDeregistered() {
        CountingRegistrar registrar = new CountingRegistrar();
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(1 << 20).withRegistrationCache(1L << 30, 2);
        try (RegisteredAllocator allocator = new RegisteredAllocator(registrar, config)) {
            for (int i = 0; i < 10; i++) {
                allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 << 20).release();
            }
            AllocatorStats stats = allocator.stats();
            assertEquals(1, registrar.registrations(), "one registration for ten transfers");
            assertEquals(9, stats.registrationCacheHits());
            assertEquals(1, stats.registrationCacheMisses());
            allocator.tryAllocate(PoolKind.RENDEZVOUS, 5 << 20).release();
            allocator.tryAllocate(PoolKind.RENDEZVOUS, 7 << 20).release();
            assertEquals(3, registrar.registrations());
            assertEquals(1, registrar.closed(), "the least recently used one went");
            assertEquals(1, allocator.stats().registrationCacheEvictions());
        }
        assertEquals(0, registrar.live());
    }
}
