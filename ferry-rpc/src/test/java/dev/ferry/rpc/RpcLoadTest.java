package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import dev.ferry.memory.AllocatorConfig;
import dev.ferry.rpc.fault.FaultInjector;
import dev.ferry.rpc.fault.FaultyTransport;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Many calls of mixed sizes, then the same under injected link failures: every call completes
 * exactly once with the right response, and every non-idempotent call runs exactly once.
 */
class RpcLoadTest extends RpcTestBase {

    /** One caller's plan: call {@code i} of caller {@code c} has its seed, method and sizes from a hash. */
    private record Plan(int calls, int callers, int maxSize, int largeEvery) {

        RpcMethod method(long seed) {
            return switch ((int) Math.floorMod(seed, 3L)) {
                case 0 -> TestService.SIZED;
                case 1 -> TestService.RECORD;
                default -> TestService.INLINE;
            };
        }

        int size(long seed, int salt) {
            long r = TestService.mix(seed, salt);
            if (largeEvery > 0 && Math.floorMod(r, (long) largeEvery) == 0) {
                return (1 << 20) + (int) Math.floorMod(r >>> 20, 1L << 20);
            }
            return TestService.logUniform(r, maxSize);
        }
    }

    /**
     * The transport for {@code callers} threads that encode requests of up to {@code maxSize}
     * bytes. Each thread that allocates send buffers may keep up to
     * {@link AllocatorConfig#threadCacheBytesPerClass()} per size class cached, and buffers cached
     * by a live thread are not handed to another (see {@code RegisteredAllocator}): the send pool
     * must hold that slack. 64 callers with sizes up to 4 KiB keep up to 64 x 8 x 256 KiB; in a
     * 32 MiB pool the pool runs dry with most of its memory idle in the callers' caches, and every
     * call waits for a buffer that never comes back.
     */
    private static TransportConfig transport(String provider, int callers, int maxSize) {
        int classes = 64 - Long.numberOfLeadingZeros(Math.max(64, maxSize + 256L) - 1) - 5; // 64 B .. maxSize
        long slack = (long) callers * classes * AllocatorConfig.defaults().threadCacheBytesPerClass();
        return transport(provider).withPools(Math.max(32L << 20, slack + (16L << 20)), 32L << 20, 64L << 20);
    }

    /** Runs the plan; returns the failures seen (empty when all is well). */
    private List<String> run(RpcChannel channel, Plan plan, AtomicLong completed, long deadlineMillis)
            throws InterruptedException {
        return run(channel, plan, completed, new AtomicLong(Long.MAX_VALUE), deadlineMillis);
    }

    /** Runs the plan's calls; a caller starts call {@code i} only once {@code i < allowed}. */
    private List<String> run(RpcChannel channel, Plan plan, AtomicLong completed, AtomicLong allowed, long deadlineMillis)
            throws InterruptedException {
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        AtomicInteger next = new AtomicInteger();
        for (int c = 0; c < plan.callers(); c++) {
            threads.add(Thread.ofPlatform().name("caller-" + c).start(() -> {
                for (int i; (i = next.getAndIncrement()) < plan.calls(); ) {
                    while (i >= allowed.get()) {
                        LockSupport.parkNanos(50_000);
                    }
                    long seed = TestService.mix(i, 77);
                    RpcMethod method = plan.method(seed);
                    int requestSize = plan.size(seed, 1);
                    int responseSize = plan.size(seed, 2);
                    try (RpcResponse response = channel.invoke(method, TestService.REQUEST_HEADER + requestSize,
                            TestService.request(seed, responseSize), deadlineMillis)) {
                        String problem = TestService.checkResponse(response, seed, responseSize);
                        if (problem != null) {
                            problems.add("call " + i + ": " + problem);
                        }
                    } catch (RuntimeException e) {
                        problems.add("call " + i + " (method " + method.id() + "): " + e);
                    }
                    completed.incrementAndGet();
                }
            }));
        }
        for (Thread thread : threads) {
            thread.join();
        }
        return List.copyOf(problems);
    }

    private static void assertEachRecordRanOnce(TestService service, RpcClient client, int expected) {
        long clientId = client.clientId();
        int calls = 0;
        for (Map.Entry<String, AtomicInteger> entry : service.runs.entrySet()) {
            assertTrue(entry.getKey().startsWith(clientId + ":"), "a call of an unknown client: " + entry.getKey());
            assertEquals(1, entry.getValue().get(), "non-idempotent call " + entry.getKey() + " ran more than once");
            calls++;
        }
        assertEquals(expected, calls, "non-idempotent calls that ran");
    }

    private static int expectedRecords(Plan plan) {
        int n = 0;
        for (int i = 0; i < plan.calls(); i++) {
            if (plan.method(TestService.mix(i, 77)) == TestService.RECORD) {
                n++;
            }
        }
        return n;
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(300)
    void mixedSizesEveryCallOnceWithTheRightResponse(String provider) throws Exception {
        Plan plan = new Plan(FULL ? 100_000 : 10_000, 16, 64 * 1024, FULL ? 500 : 1_000);
        TestService service = new TestService();
        RpcServer server = listen(server(rpc(), service), transport(provider));
        RpcClient client = client(rpc(), transport(provider, plan.callers(), plan.maxSize()));
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000));

        long start = System.nanoTime();
        List<String> problems = run(channel, plan, new AtomicLong(), 30_000);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        System.out.printf("[rpc %s] %d mixed calls, %d callers: %d ms, %.0f calls/s%n", provider, plan.calls(),
                plan.callers(), took, plan.calls() * 1000.0 / Math.max(1, took));

        assertTrue(problems.isEmpty(), () -> problems.size() + " calls failed, first: " + problems.getFirst());
        assertEachRecordRanOnce(service, client, expectedRecords(plan));
        RpcClientCounters counters = client.counters();
        assertEquals(plan.calls(), counters.calls());
        assertEquals(plan.calls(), counters.succeeded());
        assertEquals(0, channel.pendingCalls());
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(900)
    void injectedLinkFailuresLoseAndDuplicateNothing(String provider) throws Exception {
        int failures = FULL ? 1_000 : 50;
        Plan plan = new Plan(FULL ? 200_000 : 10_000, FULL ? 64 : 16, 4 * 1024, 0);
        RpcConfig config = rpc().withReconnect(1, 50, 10_000);
        TestService service = new TestService();
        service.countExecutions = true;
        RpcServer server = listen(server(config, service), transport(provider));
        FaultInjector faults = new FaultInjector();
        RpcClient client = client(config, transport(provider, plan.callers(), plan.maxSize()), null, faults);
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000));

        AtomicLong completed = new AtomicLong();
        // The callers stay at most half an interval ahead of the next failure, so that every
        // failure is injected however slowly this thread is scheduled, and hits live traffic.
        long every = plan.calls() / (failures + 1);
        AtomicLong allowed = new AtomicLong(every + every / 2);
        Thread breaker = Thread.ofPlatform().name("link-breaker").start(() -> {
            try {
                for (int f = 1; f <= failures; f++) {
                    long at = f * every;
                    while (completed.get() < at) {
                        LockSupport.parkNanos(50_000); // two cores: the callers and pollers need them
                        if (completed.get() >= plan.calls()) {
                            return;
                        }
                    }
                    faults.failLinks();
                    // Let the client reconnect before the next failure, so each one hits live traffic.
                    long wait = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                    while (!channel.isConnected() && System.nanoTime() < wait) {
                        LockSupport.parkNanos(50_000);
                    }
                    allowed.set(f == failures ? Long.MAX_VALUE : (f + 1) * every + every / 2);
                }
            } finally {
                allowed.set(Long.MAX_VALUE);
            }
        });
        long start = System.nanoTime();
        List<String> problems = run(channel, plan, completed, allowed, 60_000);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        breaker.join(10_000);
        RpcClientCounters counters = client.counters();
        RpcServerCounters serverCounters = server.counters();
        long[] runsPerCall = new long[4]; // calls run once, twice, three times, more
        for (AtomicInteger runs : service.executions.values()) {
            runsPerCall[Math.min(runs.get(), 4) - 1]++;
        }
        FaultyTransport faulty = faults.transports().getFirst();
        System.out.printf("[rpc %s] %d calls, %d callers, %d link failures (peers closed): %d ms; calls run once %d,"
                + " twice %d, 3 times %d, more %d; non-idempotent calls %d, each run once: %s; resends %d, replays %d,"
                + " duplicates while running %d, sessions %d, connect failures %d, frames dropped after a failure %d%n",
                provider, plan.calls(), plan.callers(), faults.linksFailed(), took, runsPerCall[0], runsPerCall[1],
                runsPerCall[2], runsPerCall[3], service.runs.size(),
                service.runs.values().stream().allMatch(r -> r.get() == 1), counters.resends(), serverCounters.replays(),
                serverCounters.duplicatesWhileRunning(), counters.sessionsOpened(), counters.connectFailures(),
                faulty.framesAfterFailure());

        assertTrue(problems.isEmpty(), () -> problems.size() + " calls failed, first: " + problems.getFirst());
        assertTrue(faults.linksFailed() >= failures, "only " + faults.linksFailed() + " links failed");
        assertEachRecordRanOnce(service, client, expectedRecords(plan));
        assertEquals(plan.calls(), counters.calls());
        assertEquals(plan.calls(), counters.succeeded());
        assertEquals(0, channel.pendingCalls());
        // Call ids run 1..calls: the server ran every one of them (idempotent ones perhaps again
        // after a failure, non-idempotent ones exactly once, checked above).
        assertEquals(plan.calls(), service.executions.size(), "calls the server ran");
        for (long id = 1; id <= plan.calls(); id++) {
            assertTrue(service.executions.containsKey(id), "call " + id + " never ran");
        }
        assertTrue(counters.sessionsOpened() > failures, "sessions opened: " + counters.sessionsOpened());
        assertTrue(counters.resends() > 0, "no call was resent");
    }
}
