package dev.ferry.rpc;

import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;

import org.HdrHistogram.Histogram;

/**
 * Round trip of a 64-byte call with a 64-byte response, one caller, on each transport named
 * in the arguments (default shm and netty, the baseline): mean, p50, p99, p99.9 in microseconds.
 * Run from the test class path:
 * {@code java --enable-native-access=ALL-UNNAMED -cp ... dev.ferry.rpc.RpcPingBenchmark [calls] [provider...]}.
 */
public final class RpcPingBenchmark {

    private static final RpcMethod PING = RpcMethod.idempotent(1).inline();

    private RpcPingBenchmark() {
    }

    public static void main(String[] args) throws Exception {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
        String[] providers = args.length > 1 ? java.util.Arrays.copyOfRange(args, 1, args.length)
                : new String[] {"shm", "netty"};
        RpcConfig config = RpcConfig.defaults().withSecret(SharedSecret.of(RpcTestBase.SECRET));
        for (String provider : providers) {
            try (RpcServer server = RpcServer.open(config)) {
                server.register(PING, call -> {
                    long v = call.request().get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
                    call.reply(64).set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v);
                });
                String address = server.listen(RpcTestBase.transport(provider));
                try (RpcClient client = RpcClient.open(config, RpcTestBase.transport(provider))) {
                    RpcChannel channel = client.channel(address);
                    channel.awaitConnected(10_000);
                    Histogram histogram = new Histogram(TimeUnit.SECONDS.toNanos(10), 3);
                    int warmup = Math.max(10_000, calls / 5);
                    for (int i = -warmup; i < calls; i++) {
                        long v = i;
                        long start = System.nanoTime();
                        try (RpcResponse response = channel.invoke(PING, 64,
                                body -> body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, v))) {
                            if (response.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 0) != v) {
                                throw new IllegalStateException("wrong response");
                            }
                        }
                        if (i >= 0) {
                            histogram.recordValue(System.nanoTime() - start);
                        }
                    }
                    System.out.printf("rpc ping 64 B %-6s calls %d  mean %.1f us  p50 %.1f us  p99 %.1f us"
                            + "  p99.9 %.1f us%n", provider, calls, histogram.getMean() / 1e3,
                            histogram.getValueAtPercentile(50) / 1e3, histogram.getValueAtPercentile(99) / 1e3,
                            histogram.getValueAtPercentile(99.9) / 1e3);
                }
            }
        }
    }
}
