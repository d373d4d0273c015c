package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class PoolQuotaTest {

    private static final int MIB = 1 << 20;
    private static final int SIZE = 4096;

    private static AllocatorConfig twoMebibytesEach() {
        return AllocatorConfig.defaults().withSlabBytes(MIB).withQuota(PoolKind.SEND, 2 * MIB)
                .withQuota(PoolKind.RECEIVE, 2 * MIB).withQuota(PoolKind.RENDEZVOUS, 2 * MIB);
    }

    private static List<RegisteredBuffer> exhaust(RegisteredAllocator allocator, PoolKind pool) {
        List<RegisteredBuffer> taken = new ArrayList<>();
        for (RegisteredBuffer b; (b = allocator.tryAllocate(pool, SIZE)) != null; ) {
            taken.add(b);
        }
        return taken;
    }

    @ParameterizedTest
    @EnumSource(PoolKind.class)
    void exhaustionIsBackPressureAndOtherPoolsAreUnaffected(PoolKind exhausted) {
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, twoMebibytesEach())) {
            List<RegisteredBuffer> taken = exhaust(allocator, exhausted);
            assertEquals(2 * MIB / SIZE, taken.size(), "the whole quota, not a byte more");
            assertNull(allocator.tryAllocate(exhausted, SIZE));
            assertNull(allocator.tryAllocate(exhausted, 64), "no other class either: the slabs are full");
            assertEquals(2 * MIB, allocator.stats().pool(exhausted).bytesInUse());

            for (PoolKind other : PoolKind.values()) {
                if (other != exhausted) {
                    List<RegisteredBuffer> others = exhaust(allocator, other);
                    assertEquals(2 * MIB / SIZE, others.size(), other + " must keep its whole quota");
                    others.forEach(RegisteredBuffer::release);
                }
            }

            taken.removeLast().release();
            RegisteredBuffer again = allocator.tryAllocate(exhausted, SIZE);
            assertNotNull(again, "recovered after a release");
            taken.add(again);
            taken.forEach(RegisteredBuffer::release);
            assertEquals(0, allocator.stats().buffersInUse());
        }
    }

    @Test
    void blockingAllocateWaitsForAReleaseOnAnotherThread() throws Exception {
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, twoMebibytesEach())) {
            List<RegisteredBuffer> taken = exhaust(allocator, PoolKind.SEND);
            Thread[] waiter = new Thread[1];
            CompletableFuture<RegisteredBuffer> result = CompletableFuture.supplyAsync(() -> {
                waiter[0] = Thread.currentThread();
                try {
                    return allocator.allocate(PoolKind.SEND, SIZE, Duration.ofSeconds(20));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            }, r -> Thread.ofPlatform().start(r));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((waiter[0] == null || waiter[0].getState() != Thread.State.TIMED_WAITING)
                    && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertTrue(!result.isDone(), "must wait while SEND is exhausted");
            taken.removeLast().release();
            RegisteredBuffer got = result.get(10, TimeUnit.SECONDS);
            assertEquals(SIZE, got.capacity());
            got.release();
            taken.forEach(RegisteredBuffer::release);
        }
    }

    @Test
    void blockingAllocateTimesOutWithAClearException() throws Exception {
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, twoMebibytesEach())) {
            List<RegisteredBuffer> taken = exhaust(allocator, PoolKind.RECEIVE);
            long start = System.nanoTime();
            PoolExhaustedException e = assertThrows(PoolExhaustedException.class,
                    () -> allocator.allocate(PoolKind.RECEIVE, SIZE, Duration.ofMillis(100)));
            assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(100));
            assertEquals(PoolKind.RECEIVE, e.pool());
            assertTrue(e.getMessage().contains("RECEIVE pool exhausted"), e.getMessage());
            System.out.println(e.getMessage());
            taken.forEach(RegisteredBuffer::release);
            RegisteredBuffer after = allocator.allocate(PoolKind.RECEIVE, SIZE, Duration.ZERO);
            assertNotNull(after);
            after.release();
        }
    }

    @Test
    void largeBuffersCountAgainstTheQuota() {
        AllocatorConfig config = twoMebibytesEach().withQuota(PoolKind.RENDEZVOUS, 4 * MIB);
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config)) {
            RegisteredBuffer a = allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 * MIB / 2);
            RegisteredBuffer b = allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 * MIB / 2);
            assertNotNull(a);
            assertNotNull(b);
            assertNull(allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 * MIB / 2));
            assertEquals(3 * MIB, allocator.stats().pool(PoolKind.RENDEZVOUS).reservedBytes());
            a.release();
            RegisteredBuffer c = allocator.tryAllocate(PoolKind.RENDEZVOUS, 3 * MIB / 2);
            assertNotNull(c);
            b.release();
            c.release();
        }
    }

    @Test
    void buffersCachedByAnExitedThreadComeBack() throws Exception {
        AllocatorConfig config = twoMebibytesEach().withQuota(PoolKind.SEND, MIB);
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config)) {
            Thread thread = Thread.ofPlatform().start(() -> exhaust(allocator, PoolKind.SEND)
                    .forEach(RegisteredBuffer::release));
            thread.join();
            List<RegisteredBuffer> taken = exhaust(allocator, PoolKind.SEND);
            assertEquals(MIB / SIZE, taken.size(), "the exited thread's cache must be swept");
            taken.forEach(RegisteredBuffer::release);
        }
    }

    @Test
    void crossThreadReleaseReturnsBuffersForTheAllocatingThread() throws Exception {
        AllocatorConfig config = twoMebibytesEach().withQuota(PoolKind.RECEIVE, MIB);
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config)) {
            for (int round = 0; round < 20; round++) {
                List<RegisteredBuffer> taken = exhaust(allocator, PoolKind.RECEIVE);
                assertEquals(MIB / SIZE, taken.size(), "round " + round);
                Thread releaser = Thread.ofPlatform().start(() -> taken.forEach(RegisteredBuffer::release));
                releaser.join();
            }
        }
    }

    /**
     * Buffers allocated on one thread and freed on another come back as the same objects: a run
     * whose slots all came back keeps them until the slabs are full, instead of giving its pages
     * back and being carved again (with new buffer objects) at the next allocation. A producer
     * allocates, a consumer frees, a few hundred in flight between them.
     */
    @Test
    void buffersFreedOnAnotherThreadAreReusedNotCarvedAgain() throws Exception {
        int size = 16 * 1024;
        long quota = 8L * MIB;
        AllocatorConfig config = twoMebibytesEach().withQuota(PoolKind.SEND, quota);
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config)) {
            Set<RegisteredBuffer> seen = Collections.newSetFromMap(new IdentityHashMap<>());
            ArrayBlockingQueue<RegisteredBuffer> inFlight = new ArrayBlockingQueue<>(300);
            RegisteredBuffer end = allocator.tryAllocate(PoolKind.SEND, size);
            Thread consumer = Thread.ofPlatform().start(() -> {
                try {
                    for (RegisteredBuffer b; (b = inFlight.take()) != end; ) {
                        b.release();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            try {
                for (int i = 0; i < 50_000; i++) {
                    RegisteredBuffer b = allocator.tryAllocate(PoolKind.SEND, size);
                    assertNotNull(b, "allocation " + i);
                    seen.add(b);
                    inFlight.put(b);
                }
            } finally {
                inFlight.put(end); // the consumer stops and frees what it was given, also after a failure
                consumer.join();
                end.release();
            }
            assertTrue(seen.size() <= quota / size, seen.size() + " buffer objects for " + quota / size + " slots");
        }
    }

    /**
     * Runs that keep their emptied slots still give their pages to another size class once the
     * pool is full: the whole quota in 4 KiB buffers, all released, then the whole quota again in
     * 64 KiB buffers.
     */
    @Test
    void emptiedRunsGiveTheirPagesToAnotherSizeClassWhenThePoolIsFull() {
        AllocatorConfig config = twoMebibytesEach().withQuota(PoolKind.SEND, MIB);
        try (RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config)) {
            List<RegisteredBuffer> small = exhaust(allocator, PoolKind.SEND);
            assertEquals(MIB / SIZE, small.size());
            small.forEach(RegisteredBuffer::release);
            int large = 64 * 1024;
            List<RegisteredBuffer> taken = new ArrayList<>();
            for (RegisteredBuffer b; (b = allocator.tryAllocate(PoolKind.SEND, large)) != null; ) {
                taken.add(b);
            }
            assertEquals(MIB / large, taken.size(), "the small class's emptied runs must make room");
            taken.forEach(RegisteredBuffer::release);
        }
    }
}
