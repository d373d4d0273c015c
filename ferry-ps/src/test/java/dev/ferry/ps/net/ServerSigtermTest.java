package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code bin/ferry server} stopped with SIGTERM, after serving a client: it runs its shutdown hook
 * (exit status 143, its "stopped" line) and leaves nothing in {@code /dev/shm}. On tcp and shm
 * {@code libinfinipath}'s SIGTERM handler used to exit at once with status 1, skipping the hook;
 * Netty, which loads no libfabric, is the baseline.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ServerSigtermTest {

    @ParameterizedTest
    @ValueSource(strings = {"shm", "tcp", "netty"})
    void sigtermRunsTheShutdownHookAndLeavesNoFiles(String transport, @TempDir Path dir) throws Exception {
        String secret = HexFormat.of().formatHex(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
        String host = transport.equals("shm") ? "127.0.9." + (transport.length() + 2) : "127.0.0.1";
        PsServerMain.Options options = new PsServerMain.Options(0, host, transport, null, false, 0, 1, false, false);
        ProcessBuilder builder = new ProcessBuilder(ChildJvm.javaCommand(List.of("-Xmx128m", "-XX:TieredStopAtLevel=1"),
                PsServerMain.class.getName(), options.toArgs()));
        builder.environment().put(SharedSecret.ENV_SECRET, secret);
        builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
        Path stderr = dir.resolve("stderr.txt");
        builder.redirectError(stderr.toFile());
        Process server = builder.start();
        long pid = server.pid();
        try {
            String address;
            try (BufferedReader out = new BufferedReader(new InputStreamReader(server.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String line = out.readLine();
                assertTrue(line != null && line.startsWith(PsServerMain.LISTENING + " "),
                        "server said " + line + "; its stderr: " + Files.readString(stderr));
                address = line.substring(PsServerMain.LISTENING.length() + 1);
                RpcConfig rpc = RpcConfig.defaults().withSecret(SharedSecret.of(secret));
                TransportConfig client = TransportConfig.defaults(transport).withPools(8L << 20, 8L << 20, 16L << 20);
                try (PsClient c = PsClient.connect(rpc, client, List.of(address))) {
                    c.createTable(TableConfig.of("t", 4, Optimizer.sgd(0.1)));
                    c.push("t", new long[] {1}, new float[] {1, 1, 1, 1});
                    assertEquals(4, c.pull("t", new long[] {1}).length);
                }
                if (transport.equals("shm")) {
                    assertEquals(1, ShmLoadTest.regionsOf(pid).size(), "the server's region: " + ShmLoadTest.filesOf(pid));
                }
                server.destroy(); // SIGTERM
                assertTrue(server.waitFor(30, TimeUnit.SECONDS), "server still runs 30 s after SIGTERM");
            }
            String log = Files.readString(stderr);
            assertEquals(143, server.exitValue(), "exit status after SIGTERM; stderr: " + log);
            assertTrue(log.contains("ferry server: stopped"), "no stopped line; stderr: " + log);
            assertEquals(Set.of(), ShmLoadTest.filesOf(pid), "left in /dev/shm by the stopped server");
        } finally {
            if (server.isAlive()) {
                server.destroyForcibly();
                server.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }
}
