package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import dev.ferry.transport.SharedSecret;

/**
 * Two methods on one id would take each other's calls (a server keeps one handler per id), so a
 * second registration of a taken id is refused, naming the id; {@code replace} changes a
 * handler on purpose.
 */
class RegistrationTest {

    @Test
    void aTakenIdIsRefusedAndReplaceChangesTheHandler() {
        RpcHandler first = call -> { };
        RpcHandler second = call -> { };
        RpcConfig config = RpcConfig.defaults().withSecret(SharedSecret.of(RpcTestBase.SECRET));
        try (RpcServer server = RpcServer.open(config)) {
            server.register(RpcMethod.idempotent(0x7a01), first);
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> server.register(RpcMethod.idempotent(0x7a01).inline(), second));
            assertTrue(e.getMessage().contains("0x7a01"), e.getMessage());
            assertSame(first, server.handler(0x7a01), "the first registration stands");
            server.replace(RpcMethod.idempotent(0x7a01), second);
            assertSame(second, server.handler(0x7a01));
            server.register(RpcMethod.idempotent(0x7a02), first);
            assertSame(first, server.handler(0x7a02), "another id is free");
        }
    }
}
