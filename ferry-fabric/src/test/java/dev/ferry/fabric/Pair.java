package dev.ferry.fabric;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import java.util.function.Predicate;

/**
 * Two sessions of one provider in this process, connected to each other, with one pump that
 * drains both completion queues (some providers progress only while their queues are read,
 * so the target of an RMA must be polled too).
 */
final class Pair implements AutoCloseable {

    /** One completion or error seen by the pump. */
    record Event(boolean server, long context, long flags, long length, long data, CompletionError error) {
    }

    final FabricSession server;
    final FabricSession client;
    final FabricSession.Connection toClient;
    final FabricSession.Connection toServer;
    private final CompletionBatch serverBatch = new CompletionBatch(32);
    private final CompletionBatch clientBatch = new CompletionBatch(32);
    final List<Event> errors = new ArrayList<>();
    /** Events pumpUntil saw that did not match, for later calls. */
    private final List<Event> backlog = new ArrayList<>();
    private boolean closed;

    Pair(String provider, EndpointType type, Consumer<Endpoint> beforeAccept) {
        server = FabricSession.open(provider, type, FabricProviders.HOST, true, 1024);
        try {
            client = FabricSession.open(provider, type, FabricProviders.HOST, false, 1024);
            if (type == EndpointType.MSG) {
                CompletableFuture<FabricSession.Connection> accepted =
                        CompletableFuture.supplyAsync(() -> server.accept(10_000, beforeAccept));
                toServer = client.connect(server.address(), 10_000);
                toClient = accepted.join();
            } else {
                toServer = client.connect(server.address(), 10_000);
                toClient = server.connect(client.address(), 10_000);
                if (beforeAccept != null) {
                    beforeAccept.accept(toClient.endpoint());
                }
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    /** Drains both queues once, handing each completion to {@code sink}; errors are kept. */
    int pump(Consumer<Event> sink) {
        return drain(true, server.completionQueue(), serverBatch, sink)
                + drain(false, client.completionQueue(), clientBatch, sink);
    }

    /** Drains the server's queue only, as if the client had stopped reading. */
    int pumpServer(Consumer<Event> sink) {
        return drain(true, server.completionQueue(), serverBatch, sink);
    }

    private int drain(boolean isServer, CompletionQueue cq, CompletionBatch batch, Consumer<Event> sink) {
        int n = cq.read(batch);
        if (n == CompletionQueue.ERROR_AVAILABLE) {
            CompletionError e = cq.readError();
            if (e != null) {
                Event ev = new Event(isServer, e.context(), e.flags(), 0, 0, e);
                errors.add(ev);
                sink.accept(ev);
            }
            return 1;
        }
        for (int i = 0; i < n; i++) {
            sink.accept(new Event(isServer, batch.context(i), batch.flags(i), batch.length(i), batch.data(i), null));
        }
        return n;
    }

    /**
     * Pumps until {@code done} holds for an event, or fails after {@code millis}. The predicate
     * is asked once with {@code null} first, for a condition already met.
     */
    Event pumpUntil(Predicate<Event> done, long millis, String what) {
        long deadline = System.nanoTime() + millis * 1_000_000L;
        Event[] hit = new Event[1];
        if (done.test(null)) {
            return null;
        }
        for (java.util.Iterator<Event> it = backlog.iterator(); it.hasNext(); ) {
            Event e = it.next();
            if (done.test(e)) {
                it.remove();
                return e;
            }
        }
        while (hit[0] == null) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what + "; errors seen: " + errors);
            }
            pump(e -> {
                if (hit[0] == null && done.test(e)) {
                    hit[0] = e;
                } else {
                    backlog.add(e);
                }
            });
        }
        return hit[0];
    }

    /** Retries a post that returned false (queue full, or a connection still being set up). */
    void post(java.util.function.BooleanSupplier post, String what) {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!post.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + " kept returning EAGAIN; errors seen: " + errors);
            }
            pump(e -> { });
        }
    }

    @Override
    public void close() {
        close(false);
    }

    /** Closes both sessions, the server's first if {@code serverFirst}. */
    void close(boolean serverFirst) {
        if (closed) {
            return;
        }
        closed = true;
        serverBatch.close();
        clientBatch.close();
        FabricSession first = serverFirst ? server : client;
        FabricSession second = serverFirst ? client : server;
        try {
            if (first != null) {
                first.close();
            }
        } finally {
            if (second != null) {
                second.close();
            }
        }
    }
}
