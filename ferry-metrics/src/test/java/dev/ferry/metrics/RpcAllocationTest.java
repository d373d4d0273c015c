package dev.ferry.metrics;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.util.concurrent.TimeUnit;

import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcObserver;
import dev.ferry.rpc.RpcServer;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.Test;

/**
 * Binding the RPC latency timers adds no allocation to a call: bytes allocated per call by the
 * whole process (every thread), with the observers off and on, in alternating rounds; the
 * smallest difference over the rounds is within noise.
 */
class RpcAllocationTest {

    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static final RpcMethod ECHO = RpcMethod.idempotent(0x5001).inline();
    private static final int CALLS = 2_000;

    @Test
    void timersAddNothingPerCall() throws Exception {
        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(2);
        TransportConfig transport = TransportConfig.defaults("shm").withPools(16L << 20, 16L << 20, 16L << 20);
        try (RpcServer server = RpcServer.open(rpc)) {
            server.register(ECHO, call -> call.reply(8).fill((byte) 1));
            String address = server.listen(transport);
            try (RpcClient client = RpcClient.open(rpc, transport)) {
                RpcChannel channel = client.channel(address);
                assertTrue(channel.awaitConnected(10_000));
                FerryMetrics metrics = FerryMetrics.prometheus();
                metrics.bind(client);
                metrics.bind(server);
                RpcObserver clientTimers = client.observer();
                RpcObserver serverTimers = server.observer();
                byte[] request = new byte[16];
                perCall(channel, request); // warm-up
                double best = Double.MAX_VALUE;
                StringBuilder rounds = new StringBuilder();
                for (int round = 0; round < 3; round++) {
                    client.observe(RpcObserver.NONE);
                    server.observe(RpcObserver.NONE);
                    double off = perCall(channel, request);
                    client.observe(clientTimers);
                    server.observe(serverTimers);
                    double on = perCall(channel, request);
                    best = Math.min(best, on - off);
                    rounds.append(String.format(java.util.Locale.ROOT, " off %.0f on %.0f;", off, on));
                }
                System.out.println("RPC call, B/call over all threads:" + rounds);
                assertTrue(best < 24, "timers add " + best + " B per call:" + rounds);
                metrics.scrape();
            }
        }
    }

    private static double perCall(RpcChannel channel, byte[] request) throws Exception {
        long before = THREADS.getTotalThreadAllocatedBytes();
        for (int i = 0; i < CALLS; i++) {
            channel.call(ECHO, request).get(10, TimeUnit.SECONDS).release();
        }
        return (THREADS.getTotalThreadAllocatedBytes() - before) / (double) CALLS;
    }
}
