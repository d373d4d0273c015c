package dev.ferry.transport.fabric;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;

/** Transports a test opens, closed after it; and waiting for a condition with a bound. */
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
}
