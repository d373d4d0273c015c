package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class AllocatorCloseTest {

    private static final AllocatorConfig CONFIG = AllocatorConfig.defaults().withSlabBytes(1 << 20)
            .withRegistrationCache(64L << 20, 4);

    @Test
    void closingClosesEveryRegistrationExactlyOnce() throws Exception {
        CountingRegistrar registrar = new CountingRegistrar();
        RegisteredAllocator allocator = new RegisteredAllocator(registrar, CONFIG);
        List<RegisteredBuffer> buffers = new ArrayList<>();
        for (PoolKind pool : PoolKind.values()) {
            for (int size = 1; size <= 8 << 20; size *= 3) {
                buffers.add(allocator.tryAllocate(pool, size));
            }
        }
        // A thread that exits with buffers in its cache.
        Thread thread = Thread.ofPlatform().start(() -> allocator.tryAllocate(PoolKind.SEND, 300).release());
        thread.join();
        buffers.forEach(RegisteredBuffer::release);
        AllocatorStats stats = allocator.stats();
        assertEquals(registrar.live(), stats.registrations());
        assertTrue(stats.slabs() >= 3, stats.toString());
        int registered = registrar.registrations();

        allocator.close();
        System.out.printf("registrations %d (slabs %d, large %d), closed %d%n", registered, stats.slabs(),
                registered - stats.slabs(), registrar.closed());
        assertEquals(registered, registrar.closed());
        assertEquals(0, registrar.live());
        assertEquals(0, registrar.closedTwice());
        assertThrows(IllegalStateException.class, () -> allocator.tryAllocate(PoolKind.SEND, 64));
        allocator.close(); // harmless
        assertEquals(0, registrar.closedTwice());
    }

    @Test
    void closingWithBuffersInUseFreesEverythingAndFailsLoudly() {
        CountingRegistrar registrar = new CountingRegistrar();
        RegisteredAllocator allocator = new RegisteredAllocator(registrar,
                CONFIG.withLeakDetection(LeakDetection.PARANOID, r -> { }));
        RegisteredBuffer small = allocator.tryAllocate(PoolKind.RECEIVE, 100);
        RegisteredBuffer large = allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 << 20);
        IllegalStateException e = assertThrows(IllegalStateException.class, allocator::close);
        System.out.println(e.getMessage().lines().limit(3).toList());
        assertTrue(e.getMessage().startsWith("allocator closed with 2 buffers in use"), e.getMessage());
        assertTrue(e.getMessage().contains("closingWithBuffersInUseFreesEverythingAndFailsLoudly"), e.getMessage());
        assertEquals(0, registrar.live());
        assertThrows(IllegalStateException.class, () -> small.segment().get(ValueLayout.JAVA_BYTE, 0),
                "the slab is freed");
        assertThrows(IllegalStateException.class, () -> large.segment().get(ValueLayout.JAVA_BYTE, 0));
        small.release();
        large.release();
        assertEquals(0, registrar.closedTwice());
    }
}
