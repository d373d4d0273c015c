package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.transport.SharedSecret;

/** The HMAC challenge: a wrong secret is refused (and counted), the right one from a file works. */
class AuthenticationTest extends RpcTestBase {

    @TempDir
    Path dir;

    @ParameterizedTest
    @MethodSource("providers")
    @Timeout(30)
    void wrongSecretIsRefusedAndTheRightOneWorks(String provider) throws Exception {
        RpcServer server = listen(server(rpc(), new TestService()), transport(provider));
        String address = server.transports().getFirst().localAddress();

        RpcClient intruder = client(rpc().withSecret(SharedSecret.of("not-the-secret-at-all-000")), transport(provider));
        CompletableFuture<RpcResponse> refused = intruder.channel(address).call(TestService.SIZED,
                TestService.REQUEST_HEADER, TestService.request(1, 1), 5_000);
        ExecutionException e = assertThrows(ExecutionException.class, () -> refused.get(10, TimeUnit.SECONDS));
        AuthenticationException cause = assertInstanceOf(AuthenticationException.class, e.getCause());
        assertTrue(cause.getMessage().contains("could not prove") || cause.getMessage().contains("refused"),
                cause.getMessage());

        RpcClient anonymous = client(rpc().withoutAuthentication(), transport(provider));
        CompletableFuture<RpcResponse> anonymousCall = anonymous.channel(address).call(TestService.SIZED,
                TestService.REQUEST_HEADER, TestService.request(1, 1), 5_000);
        ExecutionException e2 = assertThrows(ExecutionException.class, () -> anonymousCall.get(10, TimeUnit.SECONDS));
        assertInstanceOf(AuthenticationException.class, e2.getCause());
        assertTrue(waitFor(() -> server.counters().refusals() >= 1, 5_000), "no refusal counted");

        Path file = dir.resolve("secret");
        Files.writeString(file, SECRET + "\n");
        RpcClient friend = client(rpc().withSecret(SharedSecret.fromFile(file)), transport(provider));
        try (RpcResponse response = friend.channel(address).invoke(TestService.SIZED, TestService.REQUEST_HEADER,
                TestService.request(2, 3))) {
            assertNull(TestService.checkResponse(response, 2, 3));
        }
        assertEquals(1, server.counters().sessions());
    }

    @Test
    @Timeout(10)
    void secretComesFromTheEnvironmentOrFailsClearly() {
        System.setProperty(SharedSecret.ENV_SECRET, SECRET);
        try {
            RpcConfig.defaults().secret().resolve();
        } finally {
            System.clearProperty(SharedSecret.ENV_SECRET);
        }
        if (System.getenv(SharedSecret.ENV_SECRET) == null && System.getenv(SharedSecret.ENV_SECRET_FILE) == null) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> RpcServer.open(RpcConfig.defaults()));
            assertTrue(e.getMessage().contains(SharedSecret.ENV_SECRET), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> SharedSecret.of("short"));
    }
}
