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

import dev.ferry.rpc.fault.FaultInjector;
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

    /** Runs the plan; returns the failures seen (empty when all is well). */
    private List<String> run(RpcChannel channel, Plan plan, AtomicLong completed, long deadlineMillis)
            throws InterruptedException {
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        AtomicInteger next = new AtomicInteger();
        for (int c = 0; c < plan.callers(); c++) {
            threads.add(Thread.ofPlatform().name("caller-" + c).start(() -> {
                for (int i; (i = next.getAndIncrement()) < plan.calls(); ) {
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
        RpcClient client = client(rpc(), transport(provider));
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
    @Timeout(600)
    void injectedLinkFailuresLoseAndDuplicateNothing(String provider) throws Exception {
        int failures = FULL ? 1_000 : 50;
        Plan plan = new Plan(FULL ? 200_000 : 10_000, FULL ? 64 : 16, 4 * 1024, 0);
        RpcConfig config = rpc().withReconnect(1, 50, 10_000);
        TestService service = new TestService();
        RpcServer server = listen(server(config, service), transport(provider));
        FaultInjector faults = new FaultInjector();
        RpcClient client = client(config, transport(provider), null, faults);
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000));

        AtomicLong completed = new AtomicLong();
        Thread breaker = Thread.ofPlatform().name("link-breaker").start(() -> {
            long every = plan.calls() / (failures + 1);
            for (int f = 1; f <= failures; f++) {
                long at = f * every;
                while (completed.get() < at) {
                    Thread.onSpinWait();
                    if (completed.get() >= plan.calls()) {
                        return;
                    }
                }
                faults.failLinks();
                // Let the client reconnect before the next failure, so each one hits live traffic.
                long wait = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (!channel.isConnected() && System.nanoTime() < wait) {
                    Thread.onSpinWait();
                }
            }
        });
        long start = System.nanoTime();
        List<String> problems = run(channel, plan, completed, 60_000);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        breaker.join(10_000);
        RpcClientCounters counters = client.counters();
        RpcServerCounters serverCounters = server.counters();
        System.out.printf("[rpc %s] %d calls, %d callers, %d link failures: %d ms; resends %d, replays %d,"
                + " duplicates while running %d, sessions %d%n", provider, plan.calls(), plan.callers(),
                faults.linksFailed(), took, counters.resends(), serverCounters.replays(),
                serverCounters.duplicatesWhileRunning(), counters.sessionsOpened());

        assertTrue(problems.isEmpty(), () -> problems.size() + " calls failed, first: " + problems.getFirst());
        assertTrue(faults.linksFailed() >= failures, "only " + faults.linksFailed() + " links failed");
        assertEachRecordRanOnce(service, client, expectedRecords(plan));
        assertEquals(plan.calls(), counters.succeeded());
        assertTrue(counters.sessionsOpened() > failures, "sessions opened: " + counters.sessionsOpened());
        assertTrue(counters.resends() > 0, "no call was resent");
        // Stale copies of completed calls may still arrive (the decorator keeps the real links up) and
        // are refused as "outcome lost": harmless, since every call above completed with its response.
    }
}
