package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Blocking completion reads. Where a provider offers a file-descriptor wait object (tcp, verbs),
 * a waiter sleeps without using the CPU and wakes on a signal or an arriving message; shm 1.17
 * has none (its unspecified wait object spins), so its queues are opened without one.
 */
@Timeout(60)
class CompletionWaitTest {

    static Stream<Arguments> providers() {
        return FabricProviders.cases();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("providers")
    void aSignalWakesABlockedWaiter(String provider, EndpointType type) throws Exception {
        try (Pair pair = new Pair(provider, type, null)) {
            CompletionQueue cq = pair.server.completionQueue();
            if (!expectWaitable(provider, cq)) {
                return;
            }
            CompletionBatch batch = new CompletionBatch(8);
            for (int round = 0; round < 3; round++) {
                CompletableFuture<long[]> waited = CompletableFuture.supplyAsync(() -> {
                    long start = System.nanoTime();
                    long cpu = THREADS.getCurrentThreadCpuTime();
                    assertEquals(0, cq.await(batch, 20_000), "nothing completed");
                    return new long[] {System.nanoTime() - start, THREADS.getCurrentThreadCpuTime() - cpu};
                });
                Thread.sleep(300);
                cq.signal();
                long[] waitedFor = waited.get(10, TimeUnit.SECONDS);
                assertTrue(waitedFor[0] < 10_000_000_000L, "woke " + waitedFor[0] / 1_000_000 + " ms later");
                // It slept: a spinning waiter would have used about 300 ms of CPU.
                assertTrue(waitedFor[1] < 100_000_000L, "the waiter used " + waitedFor[1] / 1_000_000 + " ms of CPU");
            }
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("providers")
    void anArrivingMessageCompletesABlockedRead(String provider, EndpointType type) throws Exception {
        try (Arena arena = Arena.ofShared(); OperationContexts ctx = new OperationContexts(4);
                Pair pair = new Pair(provider, type, null)) {
            MemorySegment rx = arena.allocate(64, 64);
            MemorySegment tx = arena.allocate(64, 64);
            MemoryRegion rxMr = pair.server.domain().register(rx);
            MemoryRegion txMr = pair.client.domain().register(tx);
            rxMr.bind(pair.toClient.endpoint());
            txMr.bind(pair.toServer.endpoint());
            CompletionQueue cq = pair.server.completionQueue();
            if (!expectWaitable(provider, cq)) {
                return;
            }
            CompletionBatch batch = new CompletionBatch(8);
            CompletionBatch clientBatch = new CompletionBatch(8);
            final int rounds = 20;
            long[] wake = new long[rounds];
            for (int round = 0; round < rounds; round++) {
                pair.post(() -> pair.toClient.endpoint().recv(rx.address(), 64, rxMr.descriptor(),
                        pair.toClient.peer(), ctx.context(0)), "recv");
                CompletableFuture<Long> waited = CompletableFuture.supplyAsync(() -> {
                    int n;
                    do {
                        n = cq.await(batch, 1000);
                    } while (n == 0);
                    assertEquals(1, n, "one receive completed");
                    assertEquals(ctx.context(0), batch.context(0));
                    return System.nanoTime();
                });
                Thread.sleep(20);
                tx.fill((byte) round);
                long sent = System.nanoTime();
                pair.post(() -> pair.toServer.endpoint().send(tx.address(), 64, txMr.descriptor(),
                        pair.toServer.peer(), ctx.context(1)), "send");
                while (!waited.isDone()) {
                    pair.client.completionQueue().read(clientBatch);
                }
                wake[round] = (waited.get(10, TimeUnit.SECONDS) - sent) / 1000;
                assertEquals((byte) round, rx.get(JAVA_BYTE, 63), "message " + round);
                while (pair.client.completionQueue().read(clientBatch) > 0) {
                    // the send's own completion
                }
            }
            java.util.Arrays.sort(wake);
            System.out.printf("%s %s: a message woke the waiter after %d us (median of %d), max %d us%n",
                    provider, type, wake[rounds / 2], rounds, wake[rounds - 1]);
        }
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("providers")
    void aWaitCutShortByASignalEndsEmpty(String provider, EndpointType type) throws Throwable {
        try (Pair pair = new Pair(provider, type, null)) {
            CompletionQueue cq = pair.server.completionQueue();
            if (!expectWaitable(provider, cq)) {
                return;
            }
            CompletionBatch batch = new CompletionBatch(8);
            CompletableFuture<Long> thread = new CompletableFuture<>();
            java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
            CompletableFuture<Integer> waited = CompletableFuture.supplyAsync(() -> {
                try {
                    thread.complete((long) PTHREAD_SELF.invokeExact());
                } catch (Throwable t) {
                    throw new AssertionError(t);
                }
                int waits = 0;
                while (!stop.get()) {
                    assertEquals(0, cq.await(batch, 50), "nothing completed");
                    waits++;
                }
                return waits;
            });
            long target = thread.get(10, TimeUnit.SECONDS);
            // HotSpot handles SIGUSR2 (it suspends threads with it, as profilers do) and ignores
            // one it did not ask for; the signal interrupts the waiter's poll with EINTR.
            for (int i = 0; i < 500 && !waited.isDone(); i++) {
                assertEquals(0, (int) PTHREAD_KILL.invokeExact(target, 12));
                Thread.sleep(1);
            }
            stop.set(true);
            assertTrue(waited.get(10, TimeUnit.SECONDS) > 0);
        }
    }

    private static final java.lang.invoke.MethodHandle PTHREAD_SELF = libc("pthread_self",
            java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_LONG));
    private static final java.lang.invoke.MethodHandle PTHREAD_KILL = libc("pthread_kill",
            java.lang.foreign.FunctionDescriptor.of(java.lang.foreign.ValueLayout.JAVA_INT,
                    java.lang.foreign.ValueLayout.JAVA_LONG, java.lang.foreign.ValueLayout.JAVA_INT));

    private static java.lang.invoke.MethodHandle libc(String name, java.lang.foreign.FunctionDescriptor descriptor) {
        java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
        return linker.downcallHandle(linker.defaultLookup().find(name).orElseThrow(), descriptor);
    }

    private static final java.lang.management.ThreadMXBean THREADS =
            java.lang.management.ManagementFactory.getThreadMXBean();

    /** tcp must have a wait object, shm must not; other providers are taken as they come. */
    private static boolean expectWaitable(String provider, CompletionQueue cq) {
        if (provider.equals("tcp")) {
            assertTrue(cq.waitable(), "tcp queues have a file-descriptor wait object");
        } else if (provider.equals("shm")) {
            assertFalse(cq.waitable(), "shm 1.17 has no wait object that sleeps");
            assertThrows(IllegalStateException.class, () -> cq.await(new CompletionBatch(1), 1));
            cq.signal(); // does nothing
        }
        return cq.waitable();
    }
}
