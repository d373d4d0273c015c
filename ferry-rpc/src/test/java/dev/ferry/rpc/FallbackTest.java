package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.rpc.fault.FaultInjector;
import dev.ferry.transport.Transport;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** A fabric that keeps failing moves a server's traffic to Netty TCP; when it heals, the traffic moves back. */
class FallbackTest extends RpcTestBase {

    @ParameterizedTest
    @MethodSource("fabricProviders")
    @Timeout(60)
    void repeatedFabricFailuresMoveTrafficToTcpAndBack(String provider) throws Exception {
        RpcConfig config = rpc().withReconnect(5, 50, 1_000).withBreaker(3, 10_000, 300);
        TestService service = new TestService();
        RpcServer server = server(config, service);
        listen(server, transport(provider));
        listen(server, transport("netty"));
        Transport fabricSide = server.transports().get(0);
        Transport tcpSide = server.transports().get(1);
        FaultInjector faults = new FaultInjector(provider);
        RpcClient client = client(config, transport(provider), transport("netty"), faults);
        RpcChannel channel = client.channel(fabricSide.localAddress(), tcpSide.localAddress());
        assertTrue(channel.awaitConnected(10_000));
        AtomicLong seed = new AtomicLong();
        calls(channel, seed, 50);
        assertFalse(channel.onFallback());
        long tcpBefore = tcpSide.counters().messagesReceived();

        // The fabric breaks: links fail and reconnects are refused.
        faults.transports().getFirst().refuseConnects(true);
        faults.failLinks();
        assertTrue(waitFor(channel::onFallback, 10_000), "traffic never moved to the fallback");
        long fabricBefore = fabricSide.counters().messagesReceived();
        calls(channel, seed, 200);
        assertEquals(1, client.counters().breakerOpened());
        assertTrue(tcpSide.counters().messagesReceived() - tcpBefore >= 200, "calls did not go over TCP");
        assertTrue(client.counters().fallbackSends() >= 200);

        // The fabric heals: a probe finds it and the traffic moves back.
        faults.transports().getFirst().refuseConnects(false);
        assertTrue(waitFor(() -> !channel.onFallback() && channel.isConnected(), 10_000), "traffic never moved back");
        long tcpAfter = tcpSide.counters().messagesReceived();
        long fabricAfter = fabricSide.counters().messagesReceived();
        calls(channel, seed, 200);
        assertEquals(1, client.counters().breakerClosed());
        assertTrue(fabricSide.counters().messagesReceived() - fabricAfter >= 200, "calls did not return to the fabric");
        assertTrue(tcpSide.counters().messagesReceived() - tcpAfter < 20, "calls stayed on TCP");
        assertTrue(fabricAfter >= fabricBefore);
        for (var runs : service.runs.values()) {
            assertEquals(1, runs.get());
        }
    }

    private static void calls(RpcChannel channel, AtomicLong seeds, int count) {
        for (int i = 0; i < count; i++) {
            long seed = seeds.incrementAndGet();
            RpcMethod method = seed % 2 == 0 ? TestService.SIZED : TestService.RECORD;
            try (RpcResponse response = channel.invoke(method, TestService.REQUEST_HEADER + 100,
                    TestService.request(seed, 100), 10_000)) {
                assertNull(TestService.checkResponse(response, seed, 100));
            }
        }
    }
}
