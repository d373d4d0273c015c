package dev.ferry.bench.ps;

import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * What the benchmarks need of a parameter-server client: asynchronous pull and push of a batch of
 * ids, routed to the servers that own them with {@link dev.ferry.ps.BatchPlan}. Implemented by
 * Ferry's {@link dev.ferry.ps.net.PsClient} ({@link FerryPsClient}) and over gRPC
 * ({@link GrpcPsClient}). Thread-safe.
 */
public interface PsBenchClient extends AutoCloseable {

    /**
     * Pulls the rows of {@code ids[0, count)} into {@code out} ({@code count} rows of
     * {@code dimension} floats, in the batch's order, duplicates included); the future completes
     * once {@code out} is written.
     */
    CompletableFuture<Void> pull(String table, int dimension, long[] ids, int count, float[] out);

    /**
     * {@link #pull}, waiting on the calling thread until {@code out} is written. A client may do
     * part of the work (copying rows out of its receive buffers) on the calling thread instead of
     * its network threads; the default waits for {@link #pull}.
     *
     * @throws Exception the failure of the pull
     */
    default void pullAndWait(String table, int dimension, long[] ids, int count, float[] out) throws Exception {
        try {
            pull(table, dimension, ids, count, out).get();
        } catch (java.util.concurrent.ExecutionException e) {
            throw e.getCause() instanceof Exception cause ? cause : e;
        }
    }

    /**
     * Pushes one gradient row per id of {@code ids[0, count)} ({@code count * dimension} floats of
     * {@code gradients}); rows of a duplicate id are summed first. The arrays must stay unchanged
     * until the future completes.
     */
    CompletableFuture<Void> push(String table, int dimension, long[] ids, int count, float[] gradients);

    /**
     * Whether an operation's whole work runs on the calling thread and never waits for another
     * (the floor, {@code direct}). Its latency is then the thread's CPU time: such threads, more
     * of them than cores, are only ever preempted, so a wall clock would time the scheduler's
     * slices (a p99 of milliseconds for 50 us of work). False by default.
     */
    default boolean onCallingThread() {
        return false;
    }

    /** Binds the client's meters (its RPC client and transport) to {@code metrics}; none by default. */
    default void bindMetrics(dev.ferry.metrics.FerryMetrics metrics) {
    }

    /** Counters of the client's transport, by name (empty where there are none). */
    Map<String, Long> counters();

    @Override
    void close();
}
