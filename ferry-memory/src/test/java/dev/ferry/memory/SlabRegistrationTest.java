package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Registration is per slab: however many buffers, the registrar sees one call per slab. */
class SlabRegistrationTest {

    @Test
    void registrationsStayAtTheSlabCount() {
        long allocations = TestScale.pick(100_000, 1_000_000);
        CountingRegistrar registrar = new CountingRegistrar();
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(4 << 20);
        try (RegisteredAllocator allocator = new RegisteredAllocator(registrar, config)) {
            SplittableRandom random = new SplittableRandom(42);
            RegisteredBuffer[] live = new RegisteredBuffer[64];
            PoolKind[] pools = PoolKind.values();
            for (long i = 0; i < allocations; i++) {
                int slot = random.nextInt(live.length);
                if (live[slot] != null) {
                    live[slot].release();
                }
                // Log-uniform from 1 B to 1 MiB: every size class.
                int size = 1 + random.nextInt(1 << random.nextInt(1, 21));
                live[slot] = allocator.tryAllocate(pools[random.nextInt(pools.length)], size);
                assertNotNull(live[slot]);
            }
            AllocatorStats stats = allocator.stats();
            System.out.printf("after %d allocations of mixed sizes: registrations %d, slabs %d (%d MiB)%n",
                    allocations, registrar.registrations(), stats.slabs(), stats.slabBytes() >> 20);
            assertEquals(stats.slabs(), registrar.registrations());
            assertEquals(stats.slabs(), stats.registrations());
            assertTrue(stats.slabs() >= 3, "each pool has slabs");
            for (RegisteredBuffer buffer : live) {
                buffer.release();
            }
        }
        assertEquals(0, registrar.live());
    }
}
