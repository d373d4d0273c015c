package dev.ferry.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcServer;
import dev.ferry.rpc.events.RpcEvents;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.Transports;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Each flight-recorder event, recorded in this JVM, with the fields that explain it. */
class FlightEventsTest {

    @TempDir
    Path dir;

    private List<RecordedEvent> record(ThrowingRunnable work, String... events) throws Exception {
        Path file = dir.resolve("events-" + System.nanoTime() + ".jfr");
        try (Recording recording = new Recording()) {
            for (String e : events) {
                recording.enable(e).withThreshold(Duration.ZERO);
            }
            recording.start();
            work.run();
            recording.stop();
            recording.dump(file);
        }
        return RecordingFile.readAllEvents(file);
    }

    private static List<RecordedEvent> named(List<RecordedEvent> all, String name) {
        return all.stream().filter(e -> e.getEventType().getName().equals(name)).collect(Collectors.toList());
    }

    @Test
    void transportEventsExplainLinksStallsAndRendezvous() throws Exception {
        TransportConfig config = TransportConfig.defaults("shm").withPools(16L << 20, 16L << 20, 32L << 20);
        int credits = config.receiveBuffersPerLink();
        int large = config.eagerThreshold() * 4;
        ConcurrentLinkedQueue<InboundMessage> held = new ConcurrentLinkedQueue<>();
        List<RecordedEvent> events = record(() -> {
            try (Transport receiver = Transports.open(config, (from, m) -> held.add(m));
                    Transport sender = Transports.open(config, (from, m) -> m.release())) {
                Peer peer = sender.connect(receiver.localAddress());
                List<CompletableFuture<Void>> sends = new java.util.ArrayList<>();
                // more than the receiver's buffers for one link, all held: the sender stalls for credits
                for (int i = 0; i < credits * 2 + 8; i++) {
                    OutboundMessage m = peer.allocate(64);
                    sends.add(peer.send(0, m));
                }
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (sender.counters().creditStalls() == 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertTrue(sender.counters().creditStalls() > 0, "no stall");
                while (!sends.stream().allMatch(CompletableFuture::isDone)) {
                    InboundMessage m = held.poll();
                    if (m != null) {
                        m.release();
                    } else {
                        Thread.sleep(1);
                    }
                }
                OutboundMessage big = peer.allocate(large);
                CompletableFuture<Void> pulled = peer.send(1, big);
                while (!pulled.isDone()) {
                    InboundMessage m = held.poll();
                    if (m != null) {
                        m.release();
                    }
                    Thread.sleep(1);
                }
                pulled.get(10, TimeUnit.SECONDS);
                for (InboundMessage m; (m = held.poll()) != null; ) {
                    m.release();
                }
            }
        }, "dev.ferry.transport.LinkOpened", "dev.ferry.transport.CreditStall", "dev.ferry.transport.Rendezvous",
                "dev.ferry.transport.LinkFailed");
        List<RecordedEvent> opened = named(events, "dev.ferry.transport.LinkOpened");
        assertTrue(opened.size() >= 2, "a link on each side: " + opened);
        assertEquals("shm", opened.getFirst().getString("provider"));
        assertTrue(opened.getFirst().getInt("linksOpen") >= 1);
        List<RecordedEvent> stalls = named(events, "dev.ferry.transport.CreditStall");
        assertFalse(stalls.isEmpty(), "a credit stall");
        assertTrue(stalls.getFirst().getInt("queued") >= 1, stalls.toString());
        List<RecordedEvent> rendezvous = named(events, "dev.ferry.transport.Rendezvous");
        assertEquals(1, rendezvous.size(), rendezvous.toString());
        assertEquals(large, rendezvous.getFirst().getLong("bytes"));
        assertEquals(1, rendezvous.getFirst().getInt("chunks"));
        assertTrue(rendezvous.getFirst().getDuration("pullTime").toNanos() > 0);
        assertTrue(named(events, "dev.ferry.transport.LinkFailed").isEmpty(), "no failure in a clean run");
    }

    @Test
    void slowHandlersAndCallsAreRecordedFastOnesAreNot() throws Exception {
        RpcMethod slow = RpcMethod.idempotent(77);
        RpcMethod fast = RpcMethod.idempotent(78);
        long sleepMillis = TimeUnit.NANOSECONDS.toMillis(RpcEvents.SLOW_CALL_NANOS) + 20;
        String[] listening = new String[1];
        List<RecordedEvent> events = record(() -> {
            RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(2);
            try (RpcServer server = RpcServer.open(rpc)) {
                server.register(slow, call -> Thread.sleep(sleepMillis));
                server.register(fast, call -> { });
                String address = server.listen(TransportConfig.defaults("netty"));
                listening[0] = address;
                try (RpcClient client = RpcClient.open(rpc, TransportConfig.defaults("netty"))) {
                    var channel = client.channel(address);
                    for (int i = 0; i < 20; i++) {
                        channel.call(fast, new byte[8]).get(10, TimeUnit.SECONDS).release();
                    }
                    channel.call(slow, new byte[8]).get(10, TimeUnit.SECONDS).release();
                }
            }
        }, "dev.ferry.rpc.SlowCall", "dev.ferry.rpc.SlowHandler");
        String address = listening[0];
        // Only runs past the threshold are recorded (on a loaded machine a fast method may be one too).
        for (RecordedEvent e : events) {
            assertTrue(e.getDuration("latency").toNanos() >= RpcEvents.SLOW_CALL_NANOS, e.toString());
        }
        List<RecordedEvent> handlers = named(events, "dev.ferry.rpc.SlowHandler").stream()
                .filter(e -> e.getInt("method") == 77).toList();
        assertEquals(1, handlers.size(), handlers.toString());
        assertTrue(handlers.getFirst().getBoolean("ok"));
        assertTrue(handlers.getFirst().getDuration("latency").toMillis() >= sleepMillis);
        List<RecordedEvent> calls = named(events, "dev.ferry.rpc.SlowCall").stream()
                .filter(e -> e.getInt("method") == 77).toList();
        assertEquals(1, calls.size(), calls.toString());
        assertEquals(address, calls.getFirst().getString("server"));
        assertTrue(calls.getFirst().getDuration("latency").toMillis() >= sleepMillis);
    }

    @Test
    void checkpointsWrittenAndRestored() throws Exception {
        Path checkpoints = dir.resolve("checkpoints");
        List<RecordedEvent> events = record(() -> {
            try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
                ps.createTable(TableConfig.of("emb", 4, Optimizer.sgd(0.1)).withMaxRows(1024));
                try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                    ps.pull("emb", 4, new long[] {1, 2, 3}, 0, 3, arena.allocate(3 * 4 * Float.BYTES));
                }
                ps.checkpoint(checkpoints);
            }
            try (ParameterServer restored = ParameterServer.open(PsConfig.defaults(), checkpoints)) {
                assertEquals(3, restored.describe("emb").rows());
            }
        }, "dev.ferry.ps.CheckpointWritten", "dev.ferry.ps.CheckpointRestored");
        RecordedEvent written = named(events, "dev.ferry.ps.CheckpointWritten").getFirst();
        assertEquals(1, written.getInt("tables"));
        assertEquals(3, written.getLong("rows"));
        assertTrue(written.getString("path").startsWith(checkpoints.toString()));
        RecordedEvent restored = named(events, "dev.ferry.ps.CheckpointRestored").getFirst();
        assertEquals(3, restored.getLong("rows"));
        assertTrue(restored.getBoolean("verified"));
        assertEquals(written.getString("path"), restored.getString("path"));
    }

    @FunctionalInterface
    interface ThrowingRunnable {
        void run() throws Exception;
    }
}
