package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A large buffer that needs a slab's memory back, while freed small buffers of that slab sit in
 * a thread cache: the slab must come back from the waiter's own cache at once, and from another
 * live thread's cache at that thread's next release (its owner flushes it while someone waits).
 * Before, the large buffer waited out its whole timeout with the quota held by cached buffers.
 */
@Timeout(60)
class CachedSlabTest {

    private static final int MIB = 1 << 20;
    private static final int SMALL = 4096;
    /** Bigger than the largest class (1 MiB), and with a slab in use more than the 2 MiB quota holds. */
    private static final int LARGE = 3 * MIB / 2;

    private static RegisteredAllocator allocator() {
        return new RegisteredAllocator(MemoryRegistrar.NONE,
                AllocatorConfig.defaults().withSlabBytes(MIB).withQuota(PoolKind.SEND, 2 * MIB));
    }

    @Test
    void theWaitersOwnCachedBuffersGiveTheirSlabBack() throws Exception {
        try (RegisteredAllocator allocator = allocator()) {
            allocator.tryAllocate(PoolKind.SEND, SMALL).release(); // into this thread's cache; its slab stays
            assertNull(allocator.tryAllocate(PoolKind.SEND, LARGE), "the cached buffer's slab holds the quota");
            RegisteredBuffer large = allocator.allocate(PoolKind.SEND, LARGE, Duration.ofSeconds(5));
            assertNotNull(large);
            assertTrue(large.segment().byteSize() >= LARGE);
            large.release();
            assertEquals(0, allocator.stats().buffersInUse());
        }
    }

    @Test
    void anotherThreadsCachedBuffersComeBackAtItsNextRelease() throws Exception {
        try (RegisteredAllocator allocator = allocator()) {
            // A thread like a progress thread: it takes buffers, releases them into its cache, and lives on.
            SynchronousQueue<Runnable> work = new SynchronousQueue<>();
            Thread owner = Thread.ofPlatform().name("cache-owner").start(() -> {
                try {
                    for (Runnable r; (r = work.take()) != NOOP; ) {
                        r.run();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            RegisteredBuffer[] kept = new RegisteredBuffer[1];
            CountDownLatch cached = new CountDownLatch(1);
            work.put(() -> {
                RegisteredBuffer first = allocator.tryAllocate(PoolKind.SEND, SMALL);
                kept[0] = allocator.tryAllocate(PoolKind.SEND, SMALL);
                first.release(); // cached by the owner
                cached.countDown();
            });
            assertTrue(cached.await(10, TimeUnit.SECONDS));

            CompletableFuture<RegisteredBuffer> large = CompletableFuture.supplyAsync(() -> {
                try {
                    return allocator.allocate(PoolKind.SEND, LARGE, Duration.ofSeconds(20));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }, r -> Thread.ofPlatform().name("large-waiter").start(r));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (allocator.arena(PoolKind.SEND).waiters == 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertEquals(1, allocator.arena(PoolKind.SEND).waiters, "the large allocation waits");
            assertTrue(!large.isDone());

            // The owner's next release, of the other buffer of the slab, gives back all it cached.
            work.put(() -> kept[0].release());
            RegisteredBuffer got = large.get(5, TimeUnit.SECONDS);
            assertTrue(got.segment().byteSize() >= LARGE);
            got.release();
            work.put(NOOP);
            owner.join(10_000);
            assertEquals(0, allocator.stats().buffersInUse());
        }
    }

    private static final Runnable NOOP = () -> { };
}
