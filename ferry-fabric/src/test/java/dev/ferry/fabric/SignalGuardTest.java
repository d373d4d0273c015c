package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Whatever libfabric installs, the JVM's signal handlers are the ones in place after every step
 * of a session's life: discovery, endpoint creation, address insertion, connection, traffic to a
 * new peer, close. (shm's handler, installed by the first {@code fi_endpoint}, unlinks the
 * process's regions on every routine JVM SIGSEGV; libinfinipath's exits on SIGTERM.)
 */
@Timeout(60)
class SignalGuardTest {

    static Stream<Arguments> providers() {
        return FabricProviders.cases();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("providers")
    void theJvmsHandlersStayThroughSetUpTrafficAndClose(String provider, EndpointType type) {
        assertJvmHandlers("before " + provider);
        final int count = 50;
        try (Arena arena = Arena.ofShared(); OperationContexts ctx = new OperationContexts(count + 1)) {
            // Alone first: the next session's discovery must not be what puts the JVM's handlers back.
            try (FabricSession first = FabricSession.open(provider, type, FabricProviders.HOST, true, 64)) {
                assertJvmHandlers("after opening a " + provider + " session at " + first.address().length + " B address");
            }
            assertJvmHandlers("after closing it");
            Pair pair = new Pair(provider, type, null);
            try {
                assertJvmHandlers("after opening and connecting two " + provider + " sessions");
                // A third session, and a peer that is new to both: shm maps its region on the first send.
                try (FabricSession third = FabricSession.open(provider, type, FabricProviders.HOST, false, 64)) {
                    assertJvmHandlers("after opening a third " + provider + " session");
                    if (type == EndpointType.RDM) {
                        third.connect(pair.server.address(), 10_000).close();
                        assertJvmHandlers("after inserting and removing an address");
                    }
                }
                assertJvmHandlers("after closing the third session");
                int size = 64;
                MemorySegment rx = arena.allocate((long) count * size, 64);
                MemorySegment tx = arena.allocate(size, 64);
                MemoryRegion rxMr = pair.server.domain().register(rx);
                MemoryRegion txMr = pair.client.domain().register(tx);
                rxMr.bind(pair.toClient.endpoint());
                txMr.bind(pair.toServer.endpoint());
                assertJvmHandlers("after registering memory");
                for (int i = 0; i < count; i++) {
                    long addr = rx.address() + (long) i * size;
                    long context = ctx.context(i);
                    pair.post(() -> pair.toClient.endpoint().recv(addr, size, rxMr.descriptor(), pair.toClient.peer(),
                            context), "recv");
                }
                for (int i = 0; i < count; i++) {
                    tx.fill((byte) i);
                    long context = ctx.context(count);
                    pair.post(() -> pair.toServer.endpoint().send(tx.address(), size, txMr.descriptor(),
                            pair.toServer.peer(), context), "send");
                    pair.pumpUntil(e -> e != null && !e.server() && e.context() == context, 20_000, "send completion");
                }
                int[] got = {0};
                pair.pumpUntil(e -> {
                    if (e != null && e.server() && (e.flags() & Fi.RECV) != 0) {
                        int slot = ctx.slot(e.context());
                        assertEquals((byte) slot, rx.get(JAVA_BYTE, (long) slot * size));
                        got[0]++;
                    }
                    return got[0] == count;
                }, 20_000, "messages");
                assertJvmHandlers("after traffic");
            } finally {
                pair.close();
            }
            assertJvmHandlers("after closing both sessions");
        }
    }

    @Test
    void aForeignHandlerIsNamedAndReplaced() {
        // Install SIG_IGN on SIGUSR1 behind the JVM's back: a foreign action, as a provider would.
        List<String> before = SignalGuard.foreignHandlers();
        assertTrue(before.isEmpty(), before.toString());
        long restored = SignalGuard.restoredCount();
        NativeSignals.ignore(10);
        List<String> foreign = SignalGuard.foreignHandlers();
        assertEquals(1, foreign.size(), foreign.toString());
        assertTrue(foreign.getFirst().startsWith("signal 10:"), foreign.toString());
        assertEquals(1, SignalGuard.restore());
        assertEquals(restored + 1, SignalGuard.restoredCount());
        assertTrue(SignalGuard.foreignHandlers().isEmpty());
        assertEquals(0, SignalGuard.restore());
    }

    static void assertJvmHandlers(String when) {
        List<String> foreign = SignalGuard.foreignHandlers();
        assertTrue(foreign.isEmpty(), "foreign signal handlers " + when + ": " + foreign);
    }
}
