package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.stream.Stream;

import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Inject: small sends without a completion, whose buffer is reusable as soon as the call returns. */
@Timeout(60)
class InjectTest {

    static Stream<Arguments> providers() {
        return FabricProviders.cases();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("providers")
    void injectedMessagesArriveIntactAndTheBufferIsReusableAtOnce(String provider, EndpointType type) {
        final int count = 200;
        try (Arena arena = Arena.ofShared(); OperationContexts ctx = new OperationContexts(count + 1)) {
            try (Pair pair = new Pair(provider, type, null)) {
                int size = (int) Math.min(64, pair.client.info().injectSize());
                assertTrue(size > 0, provider + " has no inject size");
                MemorySegment rx = arena.allocate((long) count * size, 64);
                MemorySegment tx = arena.allocate(size, 64);
                MemoryRegion rxMr = pair.server.domain().register(rx);
                MemoryRegion txMr = pair.client.domain().register(tx);
                rxMr.bind(pair.toClient.endpoint());
                txMr.bind(pair.toServer.endpoint());
                for (int i = 0; i < count; i++) {
                    long addr = rx.address() + (long) i * size;
                    long context = ctx.context(i);
                    pair.post(() -> pair.toClient.endpoint().recv(addr, size, rxMr.descriptor(), pair.toClient.peer(),
                            context), "recv");
                }
                boolean withData = pair.client.domain().cqDataSize() >= 4;
                for (int i = 0; i < count; i++) {
                    // The same buffer, rewritten right after each inject returns.
                    tx.fill((byte) i);
                    long data = i;
                    pair.post(() -> withData
                            ? pair.toServer.endpoint().injectData(tx.address(), size, data, pair.toServer.peer())
                            : pair.toServer.endpoint().inject(tx.address(), size, pair.toServer.peer()), "inject");
                }
                int[] got = {0};
                pair.pumpUntil(e -> {
                    if (e != null && e.server() && (e.flags() & Fi.RECV) != 0) {
                        int slot = ctx.slot(e.context());
                        assertEquals(size, e.length());
                        if (withData) {
                            assertEquals(slot, e.data(), "immediate data of message " + slot);
                        }
                        for (int j = 0; j < size; j++) {
                            assertEquals((byte) slot, rx.get(JAVA_BYTE, (long) slot * size + j), "message " + slot);
                        }
                        got[0]++;
                    }
                    return got[0] == count;
                }, 20_000, "injected messages");
                assertEquals(count, got[0]);
            }
        }
    }
}
