package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/**
 * Transports a test opens, closed after it; waiting for a condition with a bound; and the
 * numbered message bodies tests send and check byte for byte.
 */
abstract class FabricTransportFixture {

    private final List<Transport> opened = new CopyOnWriteArrayList<>();

    @AfterEach
    void closeTransports() {
        opened.forEach(Transport::close);
    }

    /** Opens a transport that is closed after the test. */
    protected Transport open(TransportConfig config, MessageHandler handler) {
        Transport t = Transports.open(config, handler);
        opened.add(t);
        return t;
    }

    /** Polls {@code condition} until it holds (true) or {@code millis} pass (false). */
    static boolean waitFor(BooleanSupplier condition, long millis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(5);
        }
        return true;
    }

    /**
     * Closes {@code transport} from a thread of its own once {@code due} holds (or after 30 s);
     * join the thread returned. A close due at a count of sends, not at a time, lands mid-stream
     * however fast the sender runs.
     */
    static Thread closeWhen(Transport transport, BooleanSupplier due) {
        return Thread.ofPlatform().start(() -> {
            try {
                waitFor(due, 30_000);
            } catch (InterruptedException e) {
                return;
            }
            transport.close();
        });
    }

    /** Writes message {@code seq} of {@code stream}: its number, then bytes derived from both. */
    static void fill(MemorySegment body, int stream, long seq) {
        body.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        for (long i = 8; i < body.byteSize(); i++) {
            body.set(ValueLayout.JAVA_BYTE, i, (byte) (stream * 131 + seq * 7 + i));
        }
    }

    /** Null if {@code body} is what {@link #fill} wrote for {@code stream} and {@code seq}; else what differs. */
    static String check(MemorySegment body, int stream, long seq) {
        for (long i = 8; i < body.byteSize(); i++) {
            if (body.get(ValueLayout.JAVA_BYTE, i) != (byte) (stream * 131 + seq * 7 + i)) {
                return "stream " + stream + " message " + seq + ": byte " + i + " of " + body.byteSize() + " is wrong";
            }
        }
        return null;
    }

    /** Sends message {@code seq} of {@code size} bytes on stream 0, {@link #fill filled}. */
    static java.util.concurrent.CompletableFuture<Void> sendSeq(dev.ferry.transport.Peer peer, long seq, int size) {
        dev.ferry.transport.OutboundMessage message = peer.allocate(size);
        fill(message.segment(), 0, seq);
        return peer.send(0, message);
    }

    /** Send buffers {@code transport} has handed out and not got back (its control frames' included). */
    static long sendPoolBuffers(Transport transport) {
        return transport.allocatorStats().orElseThrow().pool(dev.ferry.memory.PoolKind.SEND).buffersInUse();
    }
}
