package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Deadlines swept on the timer thread ({@link CallTimeouts}) instead of a task per call: each
 * expired call fails exactly once with {@link RpcTimeoutException}, its late reply is dropped
 * (and released), and a call answered in time is never expired afterwards.
 */
class CallDeadlineTest extends RpcTestBase {

    private static final int PAIRS = 20;

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(60)
    void expiredCallsFailOnceAndAnsweredOnesNeverExpire(String provider) throws Exception {
        RpcServer server = listen(server(rpc(), new TestService()), transport(provider));
        RpcClient client = client(rpc(), transport(provider));
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000), "no session within 10 s");
        RpcClientCounters before = client.counters();

        List<CompletableFuture<RpcResponse>> late = new ArrayList<>();
        List<CompletableFuture<RpcResponse>> answered = new ArrayList<>();
        long answeredDeadline = 1_500;
        long start = System.nanoTime();
        for (int i = 0; i < PAIRS; i++) {
            // The handler sleeps 300 ms (it stops 100 ms past the deadline) and then answers: too late.
            late.add(channel.call(TestService.SLEEP, 8, body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 300L),
                    20 + i));
            answered.add(channel.call(TestService.SIZED, TestService.REQUEST_HEADER + 16,
                    TestService.request(i, 32), answeredDeadline));
        }
        for (int i = 0; i < PAIRS; i++) {
            try (RpcResponse response = answered.get(i).get(10, TimeUnit.SECONDS)) {
                assertNull(TestService.checkResponse(response, i, 32));
            }
        }
        for (CompletableFuture<RpcResponse> future : late) {
            try {
                future.get(10, TimeUnit.SECONDS).release();
                fail("a call past its deadline was answered");
            } catch (ExecutionException e) {
                assertTrue(e.getCause() instanceof RpcTimeoutException, "failed with " + e.getCause());
            }
        }
        // Past every deadline, and past the late replies: nothing completes a second time.
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        Thread.sleep(Math.max(500, answeredDeadline + 300 - waited));
        RpcClientCounters after = client.counters();
        assertEquals(2 * PAIRS, after.calls() - before.calls());
        assertEquals(PAIRS, after.timeouts() - before.timeouts(), "timeouts");
        assertEquals(PAIRS, after.succeeded() - before.succeeded(), "successes");
        assertEquals(0, channel.pendingCalls());
    }

    @Test
    void onlyADeadlineBeforeTheNextSweepArmsATimer() {
        List<Long> armed = new ArrayList<>();
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1) {
            @Override
            public ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
                armed.add(unit.toNanos(delay));
                return null;
            }
        };
        try {
            long tick = TimeUnit.MILLISECONDS.toNanos(50);
            CallTimeouts timeouts = new CallTimeouts(timer, List.of(), tick);
            long now = System.nanoTime();
            timeouts.watch(now + TimeUnit.SECONDS.toNanos(10));
            assertEquals(List.of(), armed, "a deadline after the next tick needs no timer of its own");
            timeouts.watch(now + TimeUnit.MILLISECONDS.toNanos(10));
            assertEquals(1, armed.size());
            assertTrue(armed.getFirst() <= TimeUnit.MILLISECONDS.toNanos(10), "armed in " + armed.getFirst() + " ns");
            timeouts.watch(now + TimeUnit.MILLISECONDS.toNanos(20));
            assertEquals(1, armed.size(), "a sweep at 10 ms comes before 20 ms");
            timeouts.watch(now + TimeUnit.MILLISECONDS.toNanos(5));
            assertEquals(2, armed.size(), "5 ms is before the armed sweep");
            timeouts.tick(System.nanoTime());
            assertEquals(2, armed.size(), "nothing pending: the tick arms nothing");
        } finally {
            timer.shutdownNow();
        }
    }
}
