package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.transport.SharedSecret;

/**
 * A server JVM killed with SIGKILL mid-traffic and restarted on the same port: clients reconnect
 * by themselves; idempotent calls issued during the outage succeed after it; non-idempotent
 * calls succeed exactly once or fail with {@link PeerUnavailableException}, never run twice.
 */
class ServerRestartTest extends RpcTestBase {

    private final List<Process> processes = new ArrayList<>();
    /** Runs of RECORD per seed, over both incarnations. */
    private final Map<Long, AtomicInteger> runs = new ConcurrentHashMap<>();

    @AfterEach
    void stopProcesses() throws InterruptedException {
        for (Process process : processes) {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }
    }

    private record Server(Process process, Thread reader) {
    }

    @org.junit.jupiter.api.io.TempDir
    Path dir;

    private void readRuns(Path file) throws IOException {
        for (String line : java.nio.file.Files.readAllLines(file)) {
            runs.computeIfAbsent(Long.parseLong(line.substring(4)), k -> new AtomicInteger()).incrementAndGet();
        }
    }

    private Server start(String provider, int port) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        String classpath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        ProcessBuilder builder = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, ServerProcess.class.getName(),
                provider, Integer.toString(port), dir.resolve("runs-" + processes.size()).toString());
        builder.environment().put(SharedSecret.ENV_SECRET, SECRET);
        builder.redirectError(ProcessBuilder.Redirect.INHERIT);
        Process process = builder.start();
        processes.add(process);
        CountDownLatch ready = new CountDownLatch(1);
        Thread reader = Thread.ofPlatform().daemon().name("server-" + process.pid()).start(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                    if (line.startsWith("READY")) {
                        ready.countDown();
                    } else {
                        System.out.println("server said: " + line);
                    }
                }
            } catch (IOException e) {
                // killed
            }
        });
        assertTrue(ready.await(30, TimeUnit.SECONDS), "server process never became ready");
        return new Server(process, reader);
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return socket.getLocalPort();
        }
    }

    /** shm, tcp and netty by default; {@code -Dferry.rpc.restart.providers} picks others. */
    static java.util.stream.Stream<String> restartProviders() {
        return java.util.Arrays.stream(System.getProperty("ferry.rpc.restart.providers", "shm,tcp,netty").split(","));
    }

    @ParameterizedTest
    @MethodSource("restartProviders")
    @Timeout(120)
    void killedServerRestartsAndClientsRecoverWithoutRunningACallTwice(String provider) throws Exception {
        int port = freePort();
        Server first = start(provider, port);
        RpcConfig config = rpc().withHeartbeat(200, 1_000).withReconnect(20, 200, 50);
        RpcClient client = client(config, transport(provider));
        RpcChannel channel = client.channel("127.0.0.1:" + port);
        assertTrue(channel.awaitConnected(10_000), () -> "no session: " + channel.lastFailure());

        // Callers run until told to stop, alternating idempotent and non-idempotent calls.
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong seeds = new AtomicLong(1);
        AtomicLong done = new AtomicLong();
        ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        Map<Long, Boolean> recordOutcomes = new ConcurrentHashMap<>();
        AtomicInteger unavailable = new AtomicInteger();
        List<Thread> callers = new ArrayList<>();
        for (int c = 0; c < 8; c++) {
            callers.add(Thread.ofPlatform().name("caller-" + c).start(() -> {
                while (!stop.get()) {
                    long seed = seeds.getAndIncrement();
                    RpcMethod method = seed % 2 == 0 ? TestService.SIZED : TestService.RECORD;
                    try (RpcResponse response = channel.invoke(method, TestService.REQUEST_HEADER + 64,
                            TestService.request(seed, 64), 20_000)) {
                        String problem = TestService.checkResponse(response, seed, 64);
                        if (problem != null) {
                            problems.add(problem);
                        }
                        if (method == TestService.RECORD) {
                            recordOutcomes.put(seed, true);
                        }
                    } catch (PeerUnavailableException e) {
                        if (method == TestService.RECORD) {
                            recordOutcomes.put(seed, false);
                            unavailable.incrementAndGet();
                        } else {
                            problems.add("idempotent call " + seed + " failed: " + e);
                        }
                    } catch (RuntimeException e) {
                        problems.add("call " + seed + " failed: " + e);
                    }
                    done.incrementAndGet();
                }
            }));
        }
        assertTrue(waitFor(() -> done.get() >= 300, 20_000), "no traffic before the kill");

        first.process().destroyForcibly(); // SIGKILL
        first.process().waitFor(10, TimeUnit.SECONDS);
        first.reader().join(5_000);
        long killedAt = System.nanoTime();
        long seedAtKill = seeds.get();
        assertTrue(waitFor(() -> !channel.isConnected(), 5_000), "the client never noticed the kill");

        // Idempotent calls issued during the outage.
        List<CompletableFuture<RpcResponse>> outage = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
            long seed = 1_000_000 + 2L * i;
            outage.add(channel.call(TestService.SIZED, TestService.REQUEST_HEADER + 32, TestService.request(seed, 32),
                    20_000));
        }
        Thread.sleep(500);
        long doneBeforeRestart = done.get();
        Server second = start(provider, port);
        for (int i = 0; i < outage.size(); i++) {
            try (RpcResponse response = outage.get(i).get(30, TimeUnit.SECONDS)) {
                String problem = TestService.checkResponse(response, 1_000_000 + 2L * i, 32);
                assertEquals(null, problem);
            } catch (ExecutionException e) {
                throw new AssertionError("an idempotent call issued during the outage failed", e.getCause());
            }
        }
        long recovered = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killedAt);
        assertTrue(waitFor(() -> done.get() >= doneBeforeRestart + 300, 20_000), "no traffic after the restart");
        stop.set(true);
        for (Thread caller : callers) {
            caller.join(30_000);
        }
        System.out.printf("[rpc %s] server killed and restarted: recovered in %d ms; %d calls, %d non-idempotent"
                + " failed as unavailable, %d resends, %d sessions%n", provider, recovered, done.get(), unavailable.get(),
                client.counters().resends(), client.counters().sessionsOpened());

        // Every RUN line of the second incarnation is read before the counts are checked.
        second.process().destroyForcibly();
        second.process().waitFor(10, TimeUnit.SECONDS);
        second.reader().join(5_000);
        readRuns(dir.resolve("runs-0"));
        readRuns(dir.resolve("runs-1"));
        assertTrue(problems.isEmpty(), () -> problems.size() + " problems, first: " + problems.peek());
        for (Map.Entry<Long, Boolean> outcome : recordOutcomes.entrySet()) {
            int ran = runs.getOrDefault(outcome.getKey(), new AtomicInteger()).get();
            if (outcome.getValue()) {
                assertEquals(1, ran, "non-idempotent call " + outcome.getKey() + " succeeded but ran " + ran + " times"
                        + " (runs seen " + runs.size() + ", killed at seed about " + seedAtKill + ")");
            } else {
                assertTrue(ran <= 1, "non-idempotent call " + outcome.getKey() + " ran " + ran + " times");
            }
        }
        for (Map.Entry<Long, AtomicInteger> run : runs.entrySet()) {
            assertTrue(run.getValue().get() <= 1, "call " + run.getKey() + " ran " + run.getValue() + " times");
        }
    }
}
