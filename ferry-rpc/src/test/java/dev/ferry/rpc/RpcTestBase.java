package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.AfterEach;

/** Opens servers and clients that the test closes at its end, and checks no buffer was left held. */
abstract class RpcTestBase {

    /** {@code full} under {@code -Pfull}: the figures of the issue; {@code ci} otherwise. */
    static final boolean FULL = "full".equals(System.getProperty("ferry.test.scale", "ci"));
    static final String SECRET = "ferry-test-secret-0123456789";

    private final List<AutoCloseable> opened = new CopyOnWriteArrayList<>();
    private final List<Transport> watched = new CopyOnWriteArrayList<>();

    /** The providers every test runs on: {@code -Dferry.rpc.providers} or shm, tcp, netty and local (in-JVM). */
    static Stream<String> providers() {
        return Arrays.stream(System.getProperty("ferry.rpc.providers", "shm,tcp,netty,local").split(","));
    }

    /** The fabric providers (those with a Netty fallback in the breaker tests). */
    static Stream<String> fabricProviders() {
        return providers().filter(p -> !p.equals("netty"));
    }

    /** A transport configuration small enough that many can be open at once. */
    static TransportConfig transport(String provider) {
        return TransportConfig.defaults(provider).withPools(32L << 20, 32L << 20, 64L << 20)
                .withConnectTimeoutMillis(5_000);
    }

    static RpcConfig rpc() {
        return RpcConfig.defaults().withSecret(SharedSecret.of(SECRET)).withHandlerThreads(8);
    }

    RpcServer server(RpcConfig config, TestService service) {
        RpcServer server = RpcServer.open(config);
        opened.add(server);
        service.register(server);
        return server;
    }

    RpcServer listen(RpcServer server, TransportConfig config) {
        return listen(server, config, TransportOpener.DEFAULT);
    }

    /** Listens on a transport {@code opener} opens (a {@link dev.ferry.rpc.fault.FaultInjector}, say). */
    RpcServer listen(RpcServer server, TransportConfig config, TransportOpener opener) {
        server.listen(config, opener);
        watched.add(server.transports().getLast());
        return server;
    }

    RpcClient client(RpcConfig config, TransportConfig primary, TransportConfig fallback, TransportOpener opener) {
        RpcClient client = RpcClient.open(config, primary, fallback, opener);
        opened.add(0, client);
        watched.add(client.primaryTransport());
        if (client.fallbackTransport() != null) {
            watched.add(client.fallbackTransport());
        }
        return client;
    }

    RpcClient client(RpcConfig config, TransportConfig primary) {
        return client(config, primary, null, TransportOpener.DEFAULT);
    }

    @AfterEach
    void closeAll() throws Exception {
        // A message is released by the thread that consumed it, which may run a little after the
        // call completed (a loaded machine): wait for the count to settle, up to 5 s. A leaked
        // message never comes back.
        List<Long> held = new ArrayList<>();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        do {
            Thread.sleep(held.isEmpty() ? 50 : 20);
            held.clear();
            for (Transport transport : watched) {
                held.add(transport.counters().receiveBuffersHeld());
            }
        } while (held.stream().anyMatch(h -> h != 0) && System.nanoTime() < until);
        for (AutoCloseable closeable : opened) {
            closeable.close();
        }
        opened.clear();
        watched.clear();
        for (long h : held) {
            assertEquals(0, h, "a transport ended with received messages not released");
        }
    }

    static boolean waitFor(BooleanSupplier condition, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + millis * 1_000_000;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }
}
