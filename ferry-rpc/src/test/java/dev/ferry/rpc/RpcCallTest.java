package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.ValueLayout;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import dev.ferry.rpc.fault.FaultInjector;
import dev.ferry.transport.RefusedPort;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The call API on every transport: bodies both ways, errors, deadlines, cancellation, inline handlers. */
class RpcCallTest extends RpcTestBase {

    private RpcChannel connect(String provider, TestService service) throws InterruptedException {
        RpcServer server = listen(server(rpc(), service), transport(provider));
        RpcClient client = client(rpc(), transport(provider));
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        assertTrue(channel.awaitConnected(10_000), "no session within 10 s");
        return channel;
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void requestAndResponseBodiesArriveIntact(String provider) throws Exception {
        RpcChannel channel = connect(provider, new TestService());
        try (RpcResponse response = channel.invoke(TestService.SIZED, 100 + TestService.REQUEST_HEADER,
                TestService.request(7, 200))) {
            assertNull(TestService.checkResponse(response, 7, 200));
            assertTrue(!response.replayed());
        }
        CompletableFuture<RpcResponse> future = channel.call(TestService.INLINE, 5000, TestService.request(8, 70_000));
        try (RpcResponse response = future.get(10, TimeUnit.SECONDS)) {
            assertNull(TestService.checkResponse(response, 8, 70_000));
        }
        try (RpcResponse response = channel.invoke(TestService.SIZED, TestService.REQUEST_HEADER,
                TestService.request(9, 0))) {
            assertEquals(0, response.segment().byteSize());
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void handlerExceptionComesBackAsRemoteException(String provider) throws Exception {
        RpcChannel channel = connect(provider, new TestService());
        RemoteException e = assertThrows(RemoteException.class,
                () -> channel.invoke(TestService.FAIL, 8, body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 42L)));
        assertEquals(IllegalStateException.class.getName(), e.remoteClass());
        assertEquals("boom 42", e.remoteMessage());
        assertEquals(RpcDescriptor.STATUS_REMOTE_EXCEPTION, e.status());
        assertEquals(TestService.FAIL.id(), e.method());

        RemoteException missing = assertThrows(RemoteException.class,
                () -> channel.invoke(TestService.MISSING, 0, body -> { }));
        assertEquals(RpcDescriptor.STATUS_UNKNOWN_METHOD, missing.status());
        assertTrue(missing.getMessage().contains("no handler for method 99"), missing.getMessage());
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void deadlineFailsTheCallNamingMethodPeerAndDeadline(String provider) throws Exception {
        RpcChannel channel = connect(provider, new TestService());
        long start = System.nanoTime();
        RpcTimeoutException e = assertThrows(RpcTimeoutException.class,
                () -> channel.invoke(TestService.SLEEP, 8, body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 2_000L), 300));
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 290 && took < 1_500, "the timeout took " + took + " ms");
        assertEquals(TestService.SLEEP.id(), e.method());
        assertEquals(300, e.deadlineMillis());
        assertTrue(e.getMessage().contains("method 4") && e.getMessage().contains(channel.address())
                && e.getMessage().contains("300 ms"), e.getMessage());
        Thread.sleep(300); // the handler notices the deadline passed and stops
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void cancellationAbandonsTheCallAndTellsTheServer(String provider) throws Exception {
        TestService service = new TestService();
        RpcChannel channel = connect(provider, service);
        CompletableFuture<RpcResponse> future = channel.call(TestService.SLEEP, 8,
                body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, 5_000L));
        Thread.sleep(200);
        assertTrue(future.cancel(true));
        assertThrows(CancellationException.class, future::join);
        assertTrue(waitFor(() -> service.cancelledSeen.get() == 1, 3_000), "the handler never saw the cancel");
        assertEquals(0, channel.pendingCalls());
        try (RpcResponse response = channel.invoke(TestService.SIZED, TestService.REQUEST_HEADER,
                TestService.request(1, 1))) {
            assertNull(TestService.checkResponse(response, 1, 1));
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void droppedFrameTimesOutAndDelayedFramesArriveLate(String provider) throws Exception {
        // Heartbeats far apart, so that the frame dropped or delayed is the call's, not a ping.
        RpcConfig config = rpc().withHeartbeat(10_000, 30_000);
        RpcServer server = listen(server(config, new TestService()), transport(provider));
        FaultInjector faults = new FaultInjector();
        RpcClient client = client(config, transport(provider), null, faults);
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        channel.invoke(TestService.SIZED, TestService.REQUEST_HEADER, TestService.request(1, 1)).release();

        faults.dropNext(1);
        assertThrows(RpcTimeoutException.class,
                () -> channel.invoke(TestService.SIZED, TestService.REQUEST_HEADER, TestService.request(2, 1), 300));
        faults.delayNext(1, 400);
        long start = System.nanoTime();
        try (RpcResponse response = channel.invoke(TestService.SIZED, 100, TestService.request(3, 10))) {
            assertNull(TestService.checkResponse(response, 3, 10));
        }
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertTrue(took >= 390, "a delayed call took only " + took + " ms");
        assertEquals(1, faults.transports().getFirst().framesDropped());
        assertEquals(1, faults.transports().getFirst().framesDelayed());
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void unreachableServerFailsWithPeerUnavailable(String provider) throws Exception {
        RpcClient client = client(rpc(), transport(provider).withConnectTimeoutMillis(500));
        ExecutionException e;
        String address;
        try (RefusedPort refused = RefusedPort.onLoopback()) {
            address = refused.address();
            CompletableFuture<RpcResponse> future = client.channel(address).call(TestService.SIZED,
                    TestService.REQUEST_HEADER, TestService.request(1, 1), 700);
            e = assertThrows(ExecutionException.class, () -> future.get(10, TimeUnit.SECONDS));
        }
        PeerUnavailableException cause = assertInstanceOf(PeerUnavailableException.class, e.getCause());
        assertTrue(cause.getMessage().contains(address) && cause.getCause() != null, cause.getMessage());
        assertEquals(1, client.counters().unavailable());
    }

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void silentServerIsDetectedByHeartbeatAndRecovered(String provider) throws Exception {
        RpcConfig config = rpc().withHeartbeat(100, 600).withReconnect(20, 200, 50);
        FaultInjector serverFaults = new FaultInjector();
        RpcServer server = server(config, new TestService());
        server.listen(transport(provider), serverFaults);
        RpcClient client = client(config, transport(provider));
        RpcChannel channel = client.channel(server.transports().getFirst().localAddress());
        channel.invoke(TestService.SIZED, TestService.REQUEST_HEADER, TestService.request(1, 1)).release();

        serverFaults.dropNext(Integer.MAX_VALUE); // the server goes silent; its links stay up
        CompletableFuture<RpcResponse> during = channel.call(TestService.SIZED, TestService.REQUEST_HEADER,
                TestService.request(2, 8), 10_000);
        assertTrue(waitFor(() -> client.counters().sessionFailures() >= 1, 3_000), "silence never detected");
        serverFaults.heal();
        try (RpcResponse response = during.get(10, TimeUnit.SECONDS)) {
            assertNull(TestService.checkResponse(response, 2, 8));
        }
        assertTrue(client.counters().resends() >= 1);
    }
}
