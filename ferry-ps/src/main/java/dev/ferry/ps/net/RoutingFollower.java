package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.PsException;

/**
 * The client's view of the cluster's routing: the {@link Route} it routes by and the servers'
 * request limits, both fetched from the servers ({@code ROUTING}), never from ZooKeeper.
 *
 * <p>Every answer carries the server's generation; a newer one than the route's starts one
 * refresh in the background ({@link #observe}). A refusal with {@code WRONG_SERVER} refreshes
 * before the part is sent again ({@link RetryPolicy#pause}). A fixed cluster (a table without
 * members) keeps its table for good. Thread-safe: the route is replaced whole, under the
 * follower's lock, only by a newer generation.
 */
final class RoutingFollower {

    private final ClientCalls calls;
    private final List<String> bootstrap;
    private final AtomicBoolean refreshing = new AtomicBoolean();
    private final AtomicBoolean refreshingAll = new AtomicBoolean();
    private final AtomicInteger nextRefreshServer = new AtomicInteger();
    private final LongAdder refreshes = new LongAdder();
    private volatile Route route;
    private volatile int maxIds = Integer.MAX_VALUE;
    private volatile long maxBytes = Long.MAX_VALUE;

    RoutingFollower(ClientCalls calls, List<String> bootstrap) {
        this.calls = calls;
        this.bootstrap = List.copyOf(bootstrap);
    }

    /** The route now; callers read it once per batch and route every part of it by that one. */
    Route route() {
        return route;
    }

    /** Routing tables fetched since connect (the first one included). */
    long refreshes() {
        return refreshes.sum();
    }

    /** A fixed cluster: server {@code i} is {@code addresses[i]}, whatever the table names. */
    synchronized void fixAddresses(List<String> addresses) {
        route = new Route(route.table(), List.copyOf(addresses));
    }

    /** Whether a part of {@code count} rows of {@code dimension} fits the servers' request limits. */
    boolean fits(int count, int dimension) {
        return count <= maxIds && PsDescriptor.rowsBytes(count, dimension) <= maxBytes;
    }

    /** Ids per request under the servers' limits. */
    int chunkIds(int dimension) {
        long byBytes = Math.max(1, maxBytes / ((long) dimension * Float.BYTES));
        return (int) Math.max(1, Math.min(maxIds, Math.min(byBytes, 1 << 20)));
    }

    /** Notes a server's generation; a newer one than the route's starts one refresh in the background. */
    void observe(long generation, Route r) {
        if (generation > r.generation() && generation > route.generation() && refreshing.compareAndSet(false, true)) {
            refresh().whenComplete((v, failure) -> refreshing.set(false));
        }
    }

    /**
     * Asks every server at once for its routing table, in the background, and routes by the
     * newest (unless such a round is under way): after a server died, asking in turn would wait
     * out a call deadline whenever the dead one comes first.
     */
    void refreshFromAll() {
        Route r = route;
        if (r.table().members().isEmpty() || !refreshingAll.compareAndSet(false, true)) {
            return;
        }
        List<String> candidates = new ArrayList<>(r.addresses());
        for (String b : bootstrap) {
            if (!candidates.contains(b)) {
                candidates.add(b);
            }
        }
        AtomicInteger left = new AtomicInteger(candidates.size());
        for (String address : candidates) {
            fetchRouting(address).whenComplete((v, failure) -> {
                if (failure == null || left.decrementAndGet() == 0) {
                    refreshingAll.set(false); // one answered (the newest it knows is installed), or none can
                }
            });
        }
    }

    /**
     * Fetches the routing table from the servers in turn (those of the current table, then the
     * bootstrap ones) until one answers, and routes by it if it is newer. A fixed cluster keeps its
     * table.
     */
    CompletableFuture<Void> refresh() {
        Route r = route;
        if (r.table().members().isEmpty()) {
            return CompletableFuture.completedFuture(null);
        }
        List<String> candidates = new ArrayList<>(r.addresses());
        for (String b : bootstrap) {
            if (!candidates.contains(b)) {
                candidates.add(b);
            }
        }
        int first = Math.floorMod(nextRefreshServer.getAndIncrement(), candidates.size());
        CompletableFuture<Void> chain = CompletableFuture.failedFuture(new PsException(PsException.Code.WRONG_SERVER,
                "no server answered with a routing table"));
        for (int i = 0; i < candidates.size(); i++) {
            String address = candidates.get((first + i) % candidates.size());
            chain = chain.exceptionallyCompose(failure -> fetchRouting(address));
        }
        return chain;
    }

    /** Fetches the routing table and limits from one server and routes by it if it is newer. */
    CompletableFuture<Void> fetchRouting(String address) {
        refreshes.increment();
        return calls.call(address, PsDescriptor.ROUTING, PsDescriptor.HEADER,
                body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, new byte[0], 0, 0, 0))
                .thenAccept(response -> {
                    try (response) {
                        MemorySegment in = response.segment();
                        long tableBytes = in.byteSize() - PsDescriptor.LIMITS;
                        if (tableBytes < 0) {
                            throw new PsException(PsException.Code.LENGTH_MISMATCH, "server " + address
                                    + " answered a routing table of " + in.byteSize() + " bytes");
                        }
                        RoutingTable table = RoutingTable.read(in.asSlice(0, tableBytes));
                        maxIds = in.get(PsDescriptor.INT, tableBytes);
                        maxBytes = in.get(PsDescriptor.LONG, tableBytes + 8);
                        install(table);
                    }
                });
    }

    private synchronized void install(RoutingTable table) {
        Route r = route;
        if (r == null || table.generation() > r.generation()) {
            route = new Route(table, table.members().isEmpty() && r != null ? r.addresses() : table.addresses());
        }
    }
}
