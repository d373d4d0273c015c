package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import dev.ferry.memory.PoolKind;
import dev.ferry.rpc.fault.FaultInjector;
import dev.ferry.rpc.fault.FaultyTransport;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A request writer that throws, on the first send or on a resend, on every transport: the
 * call fails with an {@link RpcException} naming the method and carrying the writer's
 * exception, the send buffer goes back, the attempt sends nothing to the server, and the
 * channel carries the next call. This is how a late resend is dropped (the parameter server's push writer
 * throws once its push has ended).
 */
class RequestWriterFailureTest extends RpcTestBase {

    /** Bytes asked of the server in each good call. */
    private static final int RESPONSE = 200;
    /** Request body of the calls whose writer throws: 1,024 buffers not given back are twice the send pool. */
    private static final int THROWING_BODY = 64 << 10;
    private static final int THROWING_CALLS = 1_024;

    private final TestService service = new TestService();
    /** Runs of {@link TestService#RECORD} per seed. */
    private final Map<Long, AtomicInteger> runsBySeed = new ConcurrentHashMap<>();

    /** Heartbeats far apart (the first an interval after the session opens): a frame dropped is a call's. */
    private static RpcConfig config() {
        return rpc().withHeartbeat(10_000, 30_000).withReconnect(20, 200, 50);
    }

    private record Setup(RpcServer server, RpcClient client, RpcChannel channel, FaultyTransport serverFaults,
            FaultyTransport clientFaults) {
    }

    private Setup connect(String provider) throws InterruptedException {
        service.countExecutions = true;
        service.onRecord = seed -> runsBySeed.computeIfAbsent(seed, k -> new AtomicInteger()).incrementAndGet();
        FaultInjector serverFaults = new FaultInjector();
        RpcServer server = listen(server(config(), service), transport(provider), serverFaults);
        FaultInjector clientFaults = new FaultInjector();
        RpcClient client = client(config(), transport(provider), null, clientFaults);
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000), "no session within 10 s");
        return new Setup(server, client, channel, serverFaults.transports().getFirst(),
                clientFaults.transports().getFirst());
    }

    /** A writer of {@link TestService#request} that throws {@code failure} from its {@code failFrom}-th run on. */
    private static RequestWriter failingFrom(int failFrom, long seed, AtomicInteger runs, RuntimeException failure) {
        RequestWriter good = TestService.request(seed, RESPONSE);
        return body -> {
            if (runs.incrementAndGet() >= failFrom) {
                throw failure;
            }
            good.write(body);
        };
    }

    /** The failure of {@code future}, checked to be the writer's {@code failure} on method {@code method}. */
    private static void writerFailure(CompletableFuture<RpcResponse> future, RpcMethod method,
            RuntimeException failure) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> future.get(15, TimeUnit.SECONDS));
        RpcException cause = assertInstanceOf(RpcException.class, e.getCause());
        assertEquals(RpcException.class, cause.getClass(), "not a timeout or a remote error: " + cause);
        assertSame(failure, cause.getCause());
        assertEquals("the request writer of method " + method.id() + " threw: " + failure, cause.getMessage());
    }

    /** Send buffers the client's transport has handed out, where it tells (fabric transports); else 0. */
    private static long sendBuffersInUse(RpcClient client) {
        return client.primaryTransport().allocatorStats().map(a -> a.pool(PoolKind.SEND).buffersInUse()).orElse(0L);
    }

    private static void assertGoodCall(RpcChannel channel, RpcMethod method, long seed) {
        try (RpcResponse response = channel.invoke(method, TestService.REQUEST_HEADER + 100,
                TestService.request(seed, RESPONSE))) {
            assertNull(TestService.checkResponse(response, seed, RESPONSE));
        }
    }

    /** A recorded call after the failure, seed {@code seed}: its bytes exact and run exactly once. */
    private void assertRecordsNext(Setup s, long seed) {
        assertGoodCall(s.channel(), TestService.RECORD, seed);
        assertEquals(1, runsBySeed.get(seed).get(), "runs of the good call after the failure");
    }

    /** Requests that reached the server since {@code before}. */
    private static long requestsSince(Setup s, RpcServerCounters before) {
        return s.server().counters().requests() - before.requests();
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(60)
    void aWriterThatThrowsOnTheFirstSendFailsTheCallAndSendsNothing(String provider) throws Exception {
        Setup s = connect(provider);
        // The fabric transports keep control buffers of the send pool for good: the count to return to.
        long sendBuffersBefore = sendBuffersInUse(s.client());
        RpcServerCounters before = s.server().counters();
        IllegalStateException broken = new IllegalStateException("encoder broke");
        AtomicInteger runs = new AtomicInteger();
        for (int i = 0; i < THROWING_CALLS; i++) {
            // A short deadline: a send buffer leaked by each failure would exhaust the pool and end
            // a later call with a timeout instead of the writer's failure.
            CompletableFuture<RpcResponse> future = s.channel().call(TestService.SIZED, THROWING_BODY,
                    failingFrom(1, i, runs, broken), 2_000);
            writerFailure(future, TestService.SIZED, broken);
        }
        assertEquals(THROWING_CALLS, runs.get(), "each writer ran once: a failed call is not resent");
        assertEquals(0, s.channel().pendingCalls());
        assertTrue(waitFor(() -> sendBuffersInUse(s.client()) == sendBuffersBefore, 5_000), "send buffers in use: "
                + sendBuffersInUse(s.client()) + ", before the calls " + sendBuffersBefore);

        assertGoodCall(s.channel(), TestService.SIZED, 7);
        RpcServerCounters after = s.server().counters();
        assertEquals(1, after.requests() - before.requests(), "requests that reached the server");
        assertEquals(1, after.executions() - before.executions(), "handler runs");
        assertEquals(1, service.executions.size());
        assertEquals(THROWING_CALLS, s.client().counters().calls() - s.client().counters().succeeded());
    }

    /**
     * The request is lost (dropped by the client's transport), the link fails, and the writer
     * throws when the call is resent on the next session: the call fails with its reason and the
     * server never saw it.
     */
    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(60)
    void aWriterThatThrowsOnTheResendOfALostRequestFailsTheCall(String provider) throws Exception {
        Setup s = connect(provider);
        assertGoodCall(s.channel(), TestService.RECORD, 1);
        RpcServerCounters before = s.server().counters();
        IllegalStateException late = new IllegalStateException("too late to resend");
        AtomicInteger runs = new AtomicInteger();
        RequestWriter writer = failingFrom(2, 2, runs, late);
        CompletableFuture<RpcResponse> future = s.channel().call(TestService.RECORD, TestService.REQUEST_HEADER + 100,
                body -> {
                    if (runs.get() == 0) {
                        s.clientFaults().dropNext(1); // the frame this writer fills is the next one sent
                    }
                    writer.write(body);
                }, 10_000);
        assertTrue(waitFor(() -> s.clientFaults().framesDropped() == 1, 5_000), "the request was never sent");
        s.clientFaults().failLinks();
        writerFailure(future, TestService.RECORD, late);
        assertEquals(2, runs.get(), "the writer ran for the send and the resend");
        assertTrue(s.client().counters().sessionFailures() >= 1);

        assertRecordsNext(s, 3);
        assertEquals(1, requestsSince(s, before), "requests that reached the server: the good one");
        assertEquals(null, runsBySeed.get(2L), "the lost request ran");
    }

    /**
     * The request runs and its reply is lost (dropped by the server's transport), the link
     * fails, and the writer throws when the call is resent: the call fails with the writer's
     * reason, and the request ran exactly once.
     */
    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(60)
    void aWriterThatThrowsOnTheResendAfterALostReplyFailsTheCallWhichRanOnce(String provider) throws Exception {
        Setup s = connect(provider);
        assertGoodCall(s.channel(), TestService.RECORD, 1);
        IllegalStateException late = new IllegalStateException("too late to resend");
        AtomicInteger runs = new AtomicInteger();
        service.onRecord = seed -> {
            if (seed == 2) {
                s.serverFaults().dropNext(1); // the reply this run is about to send is the next frame
            }
            runsBySeed.computeIfAbsent(seed, k -> new AtomicInteger()).incrementAndGet();
        };
        CompletableFuture<RpcResponse> future = s.channel().call(TestService.RECORD, TestService.REQUEST_HEADER + 100,
                failingFrom(2, 2, runs, late), 10_000);
        assertTrue(waitFor(() -> s.serverFaults().framesDropped() == 1, 5_000), "the reply was never dropped");
        assertEquals(1, runsBySeed.get(2L).get());
        assertTrue(!future.isDone(), "the call completed without its reply: " + future);
        s.clientFaults().failLinks();
        writerFailure(future, TestService.RECORD, late);
        assertEquals(2, runs.get(), "the writer ran for the send and the resend");

        assertRecordsNext(s, 3);
        assertEquals(1, runsBySeed.get(2L).get(), "runs of the request whose resend failed");
    }

    /**
     * The session fails (as a silent server's does: the link stays up) while the reply is
     * delayed; the call is resent on the next session, and its writer runs only once the late
     * reply has completed the call, and throws, as the parameter server's push writer does once
     * its push has ended. The call keeps its answer, the resend sends nothing, and its buffer
     * goes back.
     */
    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(60)
    void aResendWhoseWriterThrowsAfterTheReplyCompletedTheCallChangesNothing(String provider) throws Exception {
        Setup s = connect(provider);
        assertGoodCall(s.channel(), TestService.RECORD, 1);
        long sendBuffersBefore = sendBuffersInUse(s.client());
        RpcServerCounters before = s.server().counters();
        long replyDelayMillis = 2_000;
        service.onRecord = seed -> {
            if (seed == 2) {
                s.serverFaults().delayNext(1, replyDelayMillis); // the reply this run is about to send
            }
            runsBySeed.computeIfAbsent(seed, k -> new AtomicInteger()).incrementAndGet();
        };
        IllegalStateException late = new IllegalStateException("the call has ended");
        AtomicInteger runs = new AtomicInteger();
        AtomicReference<CompletableFuture<RpcResponse>> call = new AtomicReference<>();
        AtomicBoolean threwAfterTheReply = new AtomicBoolean();
        RequestWriter first = TestService.request(2, RESPONSE);
        RequestWriter writer = body -> {
            if (runs.incrementAndGet() == 1) {
                first.write(body);
                return;
            }
            // The resend, on the connect thread: held until the reply of the first send completes
            // the call, the window in which a late resend's writer runs.
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!call.get().isDone() && System.nanoTime() < until) {
                LockSupport.parkNanos(1_000_000);
            }
            threwAfterTheReply.set(call.get().isDone());
            throw late;
        };
        call.set(s.channel().call(TestService.RECORD, TestService.REQUEST_HEADER + 100, writer, 10_000));
        assertTrue(waitFor(() -> s.serverFaults().framesDelayed() == 1, 5_000), "the reply was never delayed");
        Session old = s.client().sessions.values().iterator().next();
        s.channel().sessionFailed(old, new RpcException("failed by the test, as after a silence"));

        try (RpcResponse response = call.get().get(15, TimeUnit.SECONDS)) {
            assertNull(TestService.checkResponse(response, 2, RESPONSE));
        }
        assertTrue(waitFor(() -> runs.get() == 2, 5_000), "the call was not resent before its reply came, in "
                + replyDelayMillis + " ms");
        assertTrue(waitFor(threwAfterTheReply::get, 5_000), "the resend's writer ran before the reply came");
        assertEquals(1, runsBySeed.get(2L).get());
        assertTrue(waitFor(() -> sendBuffersInUse(s.client()) == sendBuffersBefore, 5_000), "send buffers in use: "
                + sendBuffersInUse(s.client()) + ", before the call " + sendBuffersBefore);

        assertRecordsNext(s, 3);
        assertEquals(2, requestsSince(s, before), "requests that reached the server: not the resend");
    }

    /**
     * The link fails at random moments around a call whose writer throws on a resend: the reply
     * may come first (the call succeeds and is not resent) or the failure may (the call is
     * resent and fails with the writer's reason; a reply on the failed link is dropped). Each
     * call ends exactly one of these two ways, within its deadline, and ran at most once. (A
     * reply that comes after the resend began is the case above.)
     */
    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(120)
    void aResendRacingTheReplyEndsTheCallExactlyOnce(String provider) throws Exception {
        Setup s = connect(provider);
        int calls = 30;
        int succeeded = 0;
        int failedByWriter = 0;
        IllegalStateException late = new IllegalStateException("too late to resend");
        for (int i = 0; i < calls; i++) {
            assertTrue(s.channel().awaitConnected(10_000), "no session within 10 s before call " + i);
            long seed = 1_000 + i;
            AtomicInteger runs = new AtomicInteger();
            CompletableFuture<RpcResponse> future = s.channel().call(TestService.RECORD,
                    TestService.REQUEST_HEADER + 100, failingFrom(2, seed, runs, late), 10_000);
            LockSupport.parkNanos(ThreadLocalRandom.current().nextLong(200_000));
            s.clientFaults().failLinks();
            try (RpcResponse response = future.get(15, TimeUnit.SECONDS)) {
                assertNull(TestService.checkResponse(response, seed, RESPONSE), "call " + i);
                assertEquals(1, runsBySeed.get(seed).get(), "runs of call " + i + ", which succeeded");
                // Resent only if its reply crossed the failure: then the resend found it complete.
                assertTrue(runs.get() <= 2, "writer runs of call " + i + ", which succeeded: " + runs.get());
                succeeded++;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof RpcException r) || r.getCause() != late) {
                    fail("call " + i + " failed otherwise than by its writer", e.getCause());
                }
                assertEquals(2, runs.get(), "writer runs of call " + i + ", which failed");
                failedByWriter++;
            }
            AtomicInteger ran = runsBySeed.get(seed);
            assertTrue(ran == null || ran.get() == 1, "call " + i + " ran " + ran + " times");
        }
        System.out.printf("%s: of %d calls whose link failed, %d succeeded, %d failed by their writer%n", provider,
                calls, succeeded, failedByWriter);
        assertEquals(calls, succeeded + failedByWriter);
        assertTrue(s.channel().awaitConnected(10_000));
        assertGoodCall(s.channel(), TestService.RECORD, 7);
    }
}
