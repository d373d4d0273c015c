package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Two tcp connections bound to one shared receive context: messages from both land in buffers
 * posted once to the context, and a message that finds none posted waits for one.
 */
@Timeout(60)
class SharedReceiveContextTest {

    private static final int SIZE = 256;
    private static final int PER_CLIENT = 4;

    @Test
    void messagesFromTwoConnectionsArriveInBuffersPostedOnceToTheContext() {
        long liveBefore = FabricObject.liveObjects();
        try (Arena arena = Arena.ofShared();
             OperationContexts rxCtx = new OperationContexts(2 * PER_CLIENT + 1);
             OperationContexts txCtx = new OperationContexts(2 * (PER_CLIENT + 1));
             CompletionBatch batch = new CompletionBatch(16)) {
            MemorySegment rx = arena.allocate((long) (2 * PER_CLIENT + 1) * SIZE, 64);
            MemorySegment tx = arena.allocate(2L * (PER_CLIENT + 1) * SIZE, 64);
            try (FabricSession server = FabricSession.open("tcp", EndpointType.MSG, FabricProviders.HOST, true, 256, true);
                 FabricSession one = FabricSession.open("tcp", EndpointType.MSG, FabricProviders.HOST, false, 256);
                 FabricSession two = FabricSession.open("tcp", EndpointType.MSG, FabricProviders.HOST, false, 256)) {
                SharedReceiveContext srx = server.sharedReceiveContext();
                assertNotNull(srx, "tcp offers no shared receive context: " + server.info().describe());
                assertTrue(server.info().sharesReceiveContext());
                FabricSession[] clients = {one, two};
                FabricSession.Connection[] toServer = new FabricSession.Connection[2];
                for (int c = 0; c < 2; c++) {
                    CompletableFuture<FabricSession.Connection> accepted =
                            CompletableFuture.supplyAsync(() -> server.accept(10_000, null));
                    toServer[c] = clients[c].connect(server.address(), 10_000);
                    accepted.join();
                }
                MemoryRegion rxMr = server.domain().register(rx);
                MemoryRegion[] txMr = {one.domain().register(tx), two.domain().register(tx)};
                // Posted once, to the context: no endpoint has a receive of its own.
                for (int i = 0; i < 2 * PER_CLIENT; i++) {
                    assertTrue(srx.recv(rx.address() + (long) i * SIZE, SIZE, rxMr.descriptor(), rxCtx.context(i)));
                }
                int sent = 0;
                for (int seq = 0; seq < PER_CLIENT; seq++) {
                    for (int c = 0; c < 2; c++) {
                        send(clients[c], toServer[c], txMr[c], tx, txCtx, batch, c, seq, sent++);
                    }
                }
                Set<Integer> seen = new HashSet<>();
                pump(() -> {
                    int n = readReceives(server, batch, rx, rxCtx, seen);
                    pumpClients(clients, batch);
                    return n == 0 && seen.size() == 2 * PER_CLIENT;
                }, "messages from both connections");
                assertEquals(2 * PER_CLIENT, seen.size());

                // The context is empty now: a further message waits at the provider, not lost and
                // not failed, until a buffer is posted.
                send(one, toServer[0], txMr[0], tx, txCtx, batch, 0, PER_CLIENT, sent);
                long until = System.nanoTime() + 200_000_000L;
                while (System.nanoTime() < until) {
                    assertEquals(0, readReceives(server, batch, rx, rxCtx, seen), "completed without a buffer");
                    pumpClients(clients, batch);
                }
                int last = 2 * PER_CLIENT;
                assertTrue(srx.recv(rx.address() + (long) last * SIZE, SIZE, rxMr.descriptor(), rxCtx.context(last)));
                pump(() -> {
                    readReceives(server, batch, rx, rxCtx, seen);
                    pumpClients(clients, batch);
                    return seen.size() == 2 * PER_CLIENT + 1;
                }, "the message that waited for a buffer");
            }
        }
        assertEquals(liveBefore, FabricObject.liveObjects(), "native objects left open");
    }

    @Test
    void closingTheContextCancelsItsReceivesOnTheQueueItIsBoundTo() {
        long liveBefore = FabricObject.liveObjects();
        try (Arena arena = Arena.ofShared();
             OperationContexts ctx = new OperationContexts(2);
             CompletionBatch batch = new CompletionBatch(4)) {
            MemorySegment rx = arena.allocate(2L * SIZE, 64);
            try (FabricSession session = FabricSession.open("tcp", EndpointType.MSG, FabricProviders.HOST, false, 16, true)) {
                CompletionQueue own = session.domain().openCompletionQueue(16, false);
                SharedReceiveContext srx = session.domain().openSharedReceiveContext(16);
                assertTrue(srx.bind(own));
                MemoryRegion mr = session.domain().register(rx);
                assertTrue(srx.recv(rx.address(), SIZE, mr.descriptor(), ctx.context(0)));
                assertTrue(srx.recv(rx.address() + SIZE, SIZE, mr.descriptor(), ctx.context(1)));
                srx.close();
                Set<Integer> cancelled = new HashSet<>();
                for (int i = 0; i < 2; i++) {
                    assertEquals(CompletionQueue.ERROR_AVAILABLE, own.read(batch));
                    CompletionError e = own.readError();
                    assertEquals(Errno.ECANCELED, e.errno());
                    cancelled.add(ctx.slot(e.context()));
                }
                assertEquals(Set.of(0, 1), cancelled);
                assertEquals(0, session.completionQueue().read(batch));
            }
        }
        assertEquals(liveBefore, FabricObject.liveObjects(), "native objects left open");
    }

    private static void send(FabricSession client, FabricSession.Connection to, MemoryRegion mr, MemorySegment tx,
            OperationContexts ctx, CompletionBatch batch, int sender, int seq, int slot) {
        long offset = (long) slot * SIZE;
        int length = 16 + 24 * seq; // lengths differ, so each message must land whole
        for (int j = 0; j < length; j++) {
            tx.set(JAVA_BYTE, offset + j, j == 0 ? (byte) sender : j == 1 ? (byte) seq : pattern(sender, seq, j));
        }
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (!to.endpoint().send(tx.address() + offset, length, mr.descriptor(), to.peer(), ctx.context(slot))) {
            assertTrue(System.nanoTime() < deadline, "send kept returning EAGAIN");
            client.completionQueue().read(batch);
        }
    }

    private static byte pattern(int sender, int seq, int index) {
        return (byte) (sender * 97 + seq * 31 + index * 7);
    }

    /** Reads the server's receive completions, checking every byte; returns how many came. */
    private static int readReceives(FabricSession server, CompletionBatch batch, MemorySegment rx,
            OperationContexts ctx, Set<Integer> seen) {
        int n = server.completionQueue().read(batch);
        if (n == CompletionQueue.ERROR_AVAILABLE) {
            throw new AssertionError("receive failed: " + server.completionQueue().readError());
        }
        for (int i = 0; i < n; i++) {
            assertTrue((batch.flags(i) & Fi.RECV) != 0, "a completion that is not a receive");
            long offset = (long) ctx.slot(batch.context(i)) * SIZE;
            int sender = rx.get(JAVA_BYTE, offset);
            int seq = rx.get(JAVA_BYTE, offset + 1);
            assertEquals(16 + 24 * seq, batch.length(i), "length of message " + seq + " from " + sender);
            for (int j = 2; j < batch.length(i); j++) {
                assertEquals(pattern(sender, seq, j), rx.get(JAVA_BYTE, offset + j), "byte " + j);
            }
            assertTrue(seen.add(sender * 100 + seq), "message " + seq + " from " + sender + " twice");
        }
        return n;
    }

    private static void pumpClients(FabricSession[] clients, CompletionBatch batch) {
        for (FabricSession c : clients) {
            if (c.completionQueue().read(batch) == CompletionQueue.ERROR_AVAILABLE) {
                throw new AssertionError("send failed: " + c.completionQueue().readError());
            }
        }
    }

    private static void pump(BooleanSupplier done, String what) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!done.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
        }
    }
}
