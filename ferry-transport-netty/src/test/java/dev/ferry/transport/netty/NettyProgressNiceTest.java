package dev.ferry.transport.netty;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.ProgressNice;
import dev.ferry.transport.TaskStat;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The Netty transport's event loops at the nice value asked for ({@link ProgressNice}), read back from the kernel. */
@Timeout(60)
class NettyProgressNiceTest {

    @AfterEach
    void clearProperty() {
        System.clearProperty(ProgressNice.PROPERTY);
    }

    @Test
    void eventLoopsRunAtTheValueAskedAndStillDeliver() throws Exception {
        List<Long> before = TaskStat.tidsNamed("ferry-netty-");
        int ours = TaskStat.niceOf(TaskStat.currentTid());
        Assumptions.assumeTrue(ours < 19, "this thread already runs at nice 19");
        int target = Math.min(19, ours + 5); // a lower priority: no privilege needed
        System.setProperty(ProgressNice.PROPERTY, Integer.toString(target));
        AtomicInteger received = new AtomicInteger();
        try (Transport server = Transports.open(TransportConfig.defaults("netty"), (from, m) -> {
                    received.incrementAndGet();
                    m.release();
                });
                Transport client = Transports.open(TransportConfig.defaults("netty"), (from, m) -> m.release())) {
            System.clearProperty(ProgressNice.PROPERTY);
            Peer peer = client.connect(server.localAddress());
            for (int i = 0; i < 50; i++) {
                OutboundMessage message = peer.allocate(64);
                message.segment().fill((byte) i);
                peer.send(0, message).get(20, TimeUnit.SECONDS);
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (received.get() < 50 && System.nanoTime() < until) {
                Thread.sleep(5);
            }
            assertEquals(50, received.get());
            List<Long> loops = TaskStat.tidsNamed("ferry-netty-");
            loops.removeAll(before);
            assertFalse(loops.isEmpty(), "no event loop thread found");
            for (long tid : loops) {
                assertEquals(target, TaskStat.niceOf(tid), "event loop thread " + tid);
            }
        }
    }

    @Test
    void aBadValueIsRefusedWithItsReason() {
        System.setProperty(ProgressNice.PROPERTY, "fast");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Transports.open(TransportConfig.defaults("netty"), (from, m) -> m.release()));
        assertTrue(e.getMessage().contains(ProgressNice.PROPERTY), e.getMessage());
    }
}
