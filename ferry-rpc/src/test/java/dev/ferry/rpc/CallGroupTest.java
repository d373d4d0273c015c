package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A {@link CallGroup}'s wait returns once every call of the group has completed, whichever way
 * each completed (answer, remote failure, cancellation, deadline), counts each call once, and is
 * used again batch after batch; on real transports.
 */
class CallGroupTest extends RpcTestBase {

    private RpcChannel connect(String provider, RpcConfig config) throws InterruptedException {
        RpcServer server = listen(server(rpc(), new TestService()), transport(provider));
        RpcClient client = client(config, transport(provider));
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000), "no session within 10 s");
        return channel;
    }

    /** A thread that cancels {@code call} after {@code millis}, as a caller giving up would. */
    private static Thread cancelLater(CompletableFuture<RpcResponse> call, long millis) {
        return Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(millis);
            } catch (InterruptedException e) {
                return;
            }
            call.cancel(false);
        });
    }

    private static RequestWriter sleep(long millis) {
        return body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, millis);
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    @Timeout(60)
    void theWaitReturnsWhenTheLastCallCompletedHoweverEachEnded(String provider) throws Exception {
        RpcChannel channel = connect(provider, rpc());
        CallGroup group = new CallGroup();
        CompletableFuture<RpcResponse> answered = channel.call(TestService.SIZED, TestService.REQUEST_HEADER + 64,
                TestService.request(7, 48), group);
        CompletableFuture<RpcResponse> failed = channel.call(TestService.FAIL, TestService.REQUEST_HEADER,
                TestService.request(8, 0), group);
        CompletableFuture<RpcResponse> slow = channel.call(TestService.SLEEP, 8, sleep(300), group);
        CompletableFuture<RpcResponse> abandoned = channel.call(TestService.SLEEP, 8, sleep(20_000), group);
        // The two sleeps cannot have ended yet; the quick calls may have.
        int out = group.outstanding();
        assertTrue(out >= 2 && out <= 4, "every call counts once: " + out + " outstanding");
        // Another thread gives up on one call while the owner waits.
        Thread canceller = cancelLater(abandoned, 100);
        assertTrue(group.await(30, TimeUnit.SECONDS), "the group's calls all complete");
        canceller.join();
        for (CompletableFuture<RpcResponse> f : List.of(answered, failed, slow, abandoned)) {
            assertTrue(f.isDone(), "the wait returned before a call completed");
        }
        assertEquals(0, group.outstanding());
        try (RpcResponse response = answered.get()) {
            assertNull(TestService.checkResponse(response, 7, 48));
        }
        ExecutionException remote = assertThrows(ExecutionException.class, failed::get);
        assertInstanceOf(RemoteException.class, remote.getCause());
        try (RpcResponse response = slow.get()) {
            assertEquals(300L, response.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        }
        assertTrue(abandoned.isCancelled());
        abandoned.cancel(false);
        assertEquals(0, group.outstanding(), "a second cancel does not count again");
    }

    @Test
    @Timeout(60)
    void aCallPastItsDeadlineCountsAsCompleted() throws Exception {
        RpcChannel channel = connect("local", rpc().withDefaultDeadlineMillis(200));
        CallGroup group = new CallGroup();
        CompletableFuture<RpcResponse> late = channel.call(TestService.SLEEP, 8, sleep(2_000), group);
        CompletableFuture<RpcResponse> quick = channel.call(TestService.SIZED, TestService.REQUEST_HEADER + 16,
                TestService.request(3, 16), group);
        assertTrue(group.await(30, TimeUnit.SECONDS), "the deadline completes the late call");
        ExecutionException timeout = assertThrows(ExecutionException.class, late::get);
        assertInstanceOf(RpcTimeoutException.class, timeout.getCause());
        quick.get().release();
        assertEquals(0, group.outstanding());
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    @Timeout(60)
    void aWaitForFewerReturnsOnceThatManyAreOut(String provider) throws Exception {
        RpcChannel channel = connect(provider, rpc());
        CallGroup group = new CallGroup();
        CompletableFuture<RpcResponse> stuck = channel.call(TestService.SLEEP, 8, sleep(20_000), group);
        CompletableFuture<RpcResponse> quick = channel.call(TestService.SIZED, TestService.REQUEST_HEADER + 32,
                TestService.request(5, 32), group);
        assertTrue(group.awaitAtMost(1, 30, TimeUnit.SECONDS), "the quick call completes");
        assertTrue(quick.isDone(), "the wait returned before the quick call completed");
        assertFalse(stuck.isDone(), "a call of 20 s completed");
        assertEquals(1, group.outstanding());
        try (RpcResponse response = quick.get()) {
            assertNull(TestService.checkResponse(response, 5, 32));
        }
        assertFalse(group.awaitAtMost(0, 20, TimeUnit.MILLISECONDS), "the stuck call is still out");
        assertThrows(IllegalArgumentException.class, () -> group.awaitAtMost(-1, 1, TimeUnit.SECONDS));
        Thread canceller = cancelLater(stuck, 50);
        assertTrue(group.awaitAtMost(0, 30, TimeUnit.SECONDS), "the cancel wakes the owner");
        canceller.join();
        assertEquals(0, group.outstanding());
    }

    @Test
    @Timeout(60)
    void aWaitThatRunsOutSaysSoAndTheCallStillCountsWhenItEnds() throws Exception {
        RpcChannel channel = connect("local", rpc());
        CallGroup group = new CallGroup();
        CompletableFuture<RpcResponse> slow = channel.call(TestService.SLEEP, 8, sleep(500), group);
        assertFalse(group.await(20, TimeUnit.MILLISECONDS), "a call of 500 ms is still out after 20 ms");
        assertEquals(1, group.outstanding());
        slow.get(30, TimeUnit.SECONDS).release();
        assertTrue(waitFor(() -> group.outstanding() == 0, 10_000), "the completion counts");
        assertTrue(group.await(0, TimeUnit.SECONDS), "nothing left to wait for");
    }

    @Test
    @Timeout(60)
    void anInterruptedOwnerStopsWaitingAndKeepsItsInterrupt() throws Exception {
        RpcChannel channel = connect("local", rpc());
        AtomicReference<Object> seen = new AtomicReference<>();
        Thread owner = Thread.ofPlatform().start(() -> {
            CallGroup group = new CallGroup();
            CompletableFuture<RpcResponse> slow = channel.call(TestService.SLEEP, 8, sleep(10_000), group);
            boolean all = group.await(30, TimeUnit.SECONDS);
            seen.set(List.of(all, Thread.currentThread().isInterrupted(), group.outstanding()));
            slow.cancel(false);
        });
        Thread.sleep(100);
        owner.interrupt();
        owner.join(30_000);
        assertEquals(List.of(false, true, 1), seen.get());
    }

    @Test
    @Timeout(60)
    void onlyItsOwnerStartsOrAwaitsAGroup() throws Exception {
        RpcChannel channel = connect("local", rpc());
        CallGroup group = new CallGroup();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread other = Thread.ofPlatform().start(() -> {
            try {
                group.await(1, TimeUnit.SECONDS);
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        other.join();
        assertInstanceOf(IllegalStateException.class, failure.get());
        Thread starter = Thread.ofPlatform().start(() -> {
            try {
                channel.call(TestService.SIZED, TestService.REQUEST_HEADER, TestService.request(2, 8), group);
                failure.set(null);
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        starter.join();
        assertInstanceOf(IllegalStateException.class, failure.get(), "a call started on another thread");
        assertEquals(0, group.outstanding(), "the refused call is not counted");
        assertEquals(0, channel.pendingCalls(), "the refused call is not pending");
        assertEquals(Thread.currentThread(), group.owner());
        channel.call(TestService.SIZED, TestService.REQUEST_HEADER, TestService.request(1, 8), group).get().release();
    }

    @ParameterizedTest
    @ValueSource(strings = {"local", "shm"})
    @Timeout(300)
    void oneGroupServesBatchAfterBatch(String provider) throws Exception {
        RpcChannel channel = connect(provider, rpc());
        CallGroup group = new CallGroup();
        int batches = FULL ? 20_000 : 2_000;
        for (int b = 0; b < batches; b++) {
            List<CompletableFuture<RpcResponse>> calls = new ArrayList<>();
            for (int k = 0; k < 3; k++) {
                long seed = b * 3L + k;
                calls.add(channel.call(k == 1 ? TestService.INLINE : TestService.SIZED, TestService.REQUEST_HEADER + 32,
                        TestService.request(seed, 24 + k), group));
            }
            long waitStart = System.nanoTime();
            // Each call's deadline (10 s) ends it anyway: a wait of a minute runs out only if completions
            // are lost, or the host stopped this process for that long. Odd batches wait for one
            // call at a time, as a big pull scatters its parts.
            for (int left = b % 2 == 0 ? 0 : 2; left >= 0; left--) {
                if (!group.awaitAtMost(left, 60, TimeUnit.SECONDS)) {
                    fail(stalled(b, group, calls, channel, waitStart));
                }
                int done = (int) calls.stream().filter(CompletableFuture::isDone).count();
                assertTrue(done >= 3 - left, "batch " + b + ": " + done + " calls done when at most " + left
                        + " were out");
            }
            for (int k = 0; k < 3; k++) {
                assertTrue(calls.get(k).isDone(), "batch " + b + " call " + k + " not done after the wait");
                try (RpcResponse response = calls.get(k).get()) {
                    assertNull(TestService.checkResponse(response, b * 3L + k, 24 + k));
                }
            }
            assertEquals(0, group.outstanding(), "batch " + b);
        }
    }

    /** What a wait that ran out saw, for the failure message: the group, each call, the channel, every thread. */
    private static String stalled(int batch, CallGroup group, List<CompletableFuture<RpcResponse>> calls,
            RpcChannel channel, long waitStartNanos) {
        StringBuilder s = new StringBuilder("batch " + batch + ": the wait returned false after "
                + (System.nanoTime() - waitStartNanos) / 1_000_000 + " ms, interrupted "
                + Thread.currentThread().isInterrupted() + ", outstanding " + group.outstanding()
                + ", channel pending " + channel.pendingCalls() + "; calls:");
        for (CompletableFuture<RpcResponse> call : calls) {
            s.append(' ').append(call);
        }
        s.append("\n");
        Thread.getAllStackTraces().forEach((thread, stack) -> {
            s.append(thread.getName()).append(' ').append(thread.getState()).append('\n');
            for (StackTraceElement frame : stack) {
                s.append("    at ").append(frame).append('\n');
            }
        });
        return s.toString();
    }
}
