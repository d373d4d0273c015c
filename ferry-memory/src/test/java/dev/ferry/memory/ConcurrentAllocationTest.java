package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Eight threads allocate, fill, verify and release buffers of mixed sizes from all pools, and
 * hand some to a neighbour to verify and release (cross-thread free). Each buffer is filled with
 * a value unique to that allocation, one long in every 64 bytes; every slot is at least 64 bytes
 * and aligned to 64, so two live buffers that overlapped would share a checked long and one
 * check would fail.
 */
class ConcurrentAllocationTest {

    private static final int THREADS = 8;
    private static final int LIVE_PER_THREAD = 16;
    private static final long STRIDE = 64;

    private record Handoff(RegisteredBuffer buffer, long pattern) {
    }

    @Test
    void eightThreadsAllocateAndReleaseWithoutOverlap() throws Exception {
        long operations = TestScale.pick(500_000, 10_000_000);
        CountingRegistrar registrar = new CountingRegistrar();
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(4 << 20)
                .withQuota(PoolKind.SEND, 64 << 20).withQuota(PoolKind.RECEIVE, 64 << 20)
                .withQuota(PoolKind.RENDEZVOUS, 64 << 20);
        RegisteredAllocator allocator = new RegisteredAllocator(registrar, config);
        List<Queue<Handoff>> inboxes = new ArrayList<>();
        for (int i = 0; i < THREADS; i++) {
            inboxes.add(new ConcurrentLinkedQueue<>());
        }
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong verified = new AtomicLong();
        CountDownLatch done = new CountDownLatch(THREADS);
        long started = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            int id = t;
            Thread thread = Thread.ofPlatform().name("alloc-" + t).start(() -> {
                try {
                    run(allocator, id, operations / THREADS, inboxes.get(id), inboxes.get((id + 1) % THREADS),
                            verified);
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                } finally {
                    done.countDown();
                    // Keep draining what the neighbour still sends until everyone is done.
                    try {
                        do {
                            drain(inboxes.get(id), verified);
                        } while (!done.await(1, TimeUnit.MILLISECONDS));
                        drain(inboxes.get(id), verified);
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }
            });
            threads.add(thread);
        }
        for (Thread thread : threads) {
            thread.join();
        }
        long millis = (System.nanoTime() - started) / 1_000_000;
        if (failure.get() != null) {
            throw new AssertionError("a worker failed", failure.get());
        }
        AllocatorStats stats = allocator.stats();
        System.out.printf("concurrent: %d operations on %d threads in %d ms; %d buffers verified;"
                        + " slabs %d, registrations %d, thread cache hit rate %.3f%n",
                operations, THREADS, millis, verified.get(), stats.slabs(), registrar.registrations(),
                stats.threadCacheHitRate());
        assertEquals(0, stats.buffersInUse(), stats.toString());
        assertEquals(operations / THREADS * THREADS, verified.get());
        allocator.close();
        assertEquals(0, registrar.live());
        assertEquals(0, registrar.closedTwice());
    }

    private static void run(RegisteredAllocator allocator, int id, long operations, Queue<Handoff> inbox,
                            Queue<Handoff> neighbour, AtomicLong verified) {
        SplittableRandom random = new SplittableRandom(id);
        RegisteredBuffer[] live = new RegisteredBuffer[LIVE_PER_THREAD];
        long[] patterns = new long[LIVE_PER_THREAD];
        PoolKind[] kinds = PoolKind.values();
        for (long op = 0; op < operations; op++) {
            int i = random.nextInt(LIVE_PER_THREAD);
            if (live[i] != null) {
                if (random.nextInt(8) == 0) {
                    neighbour.add(new Handoff(live[i], patterns[i]));
                } else {
                    check(live[i], patterns[i]);
                    live[i].release();
                    verified.incrementAndGet();
                }
                live[i] = null;
            }
            int size = size(random);
            PoolKind kind = kinds[random.nextInt(kinds.length)];
            RegisteredBuffer buffer = allocator.tryAllocate(kind, size);
            // A full pool is back-pressure: buffers handed to a neighbour that the scheduler keeps
            // off the CPU pile up in its inbox until it runs again. Wait for it, within reason.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (buffer == null && System.nanoTime() < deadline) {
                drain(inbox, verified);
                try {
                    Thread.sleep(1);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
                buffer = allocator.tryAllocate(kind, size);
            }
            if (buffer == null) {
                throw new AssertionError("pool exhausted for 10 s at operation " + op + ": " + allocator.stats());
            }
            assertTrue(buffer.capacity() >= size);
            long pattern = ((long) id << 56) | op;
            fill(buffer, pattern);
            live[i] = buffer;
            patterns[i] = pattern;
            if ((op & 63) == 0) {
                drain(inbox, verified);
            }
        }
        for (int i = 0; i < LIVE_PER_THREAD; i++) {
            if (live[i] != null) {
                check(live[i], patterns[i]);
                live[i].release();
                verified.incrementAndGet();
            }
        }
    }

    /** Mostly eager-message sizes, some up to 64 KiB, a few above the largest class. */
    private static int size(SplittableRandom random) {
        int r = random.nextInt(1000);
        if (r < 700) {
            return 1 + random.nextInt(2048);
        }
        if (r < 995) {
            return 1 + random.nextInt(64 << 10);
        }
        return (1 << 20) + random.nextInt(1 << 20);
    }

    private static void drain(Queue<Handoff> inbox, AtomicLong verified) {
        for (Handoff handoff; (handoff = inbox.poll()) != null; ) {
            check(handoff.buffer(), handoff.pattern());
            handoff.buffer().release();
            verified.incrementAndGet();
        }
    }

    private static void fill(RegisteredBuffer buffer, long pattern) {
        MemorySegment segment = buffer.segment();
        for (long offset = 0; offset < segment.byteSize(); offset += STRIDE) {
            segment.set(ValueLayout.JAVA_LONG, offset, pattern);
        }
    }

    private static void check(RegisteredBuffer buffer, long pattern) {
        MemorySegment segment = buffer.segment();
        for (long offset = 0; offset < segment.byteSize(); offset += STRIDE) {
            long found = segment.get(ValueLayout.JAVA_LONG, offset);
            if (found != pattern) {
                throw new AssertionError(buffer + " overwritten at +" + offset + ": expected "
                        + Long.toHexString(pattern) + ", found " + Long.toHexString(found));
            }
        }
    }
}
