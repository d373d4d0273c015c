package dev.ferry.ps;

import java.util.Collection;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * A server's evictor thread: every {@link #PERIOD_NANOS} it runs {@link TableEvictor#runOnce}
 * of every table that has one, and it is the only thread that does (it owns those evictors).
 * Started when the first table with {@link Eviction} appears on a training server, stopped by
 * {@link #close} before the tables are closed.
 */
final class Evictors implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.ps");

    /**
     * Between rounds: 10 ms. A round that finds nothing to do costs one look at the row count per
     * table (and a TTL scan at most every TTL/16); the margin of a capacity must absorb the rows
     * created in one period plus one pass.
     */
    static final long PERIOD_NANOS = 10_000_000L;

    private final Supplier<Collection<SparseTable>> tables;
    private final Thread thread;
    private volatile boolean stopped;

    Evictors(Supplier<Collection<SparseTable>> tables) {
        this.tables = tables;
        this.thread = Thread.ofPlatform().daemon().name("ferry-ps-evictor").unstarted(this::run);
    }

    void start() {
        thread.start();
    }

    private void run() {
        while (!stopped) {
            for (SparseTable table : tables.get()) {
                TableEvictor evictor = table.evictor();
                if (evictor == null || stopped) {
                    continue;
                }
                try {
                    evictor.runOnce();
                } catch (PsException e) {
                    if (e.code() != PsException.Code.CLOSED) {
                        LOG.log(System.Logger.Level.WARNING, "evicting rows of table '" + table.name() + "' failed: " + e);
                    }
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.ERROR, "evicting rows of table '" + table.name() + "' failed", e);
                }
            }
            LockSupport.parkNanos(PERIOD_NANOS);
        }
    }

    /** Stops the thread and waits for its round to end. */
    @Override
    public void close() {
        stopped = true;
        LockSupport.unpark(thread);
        if (thread.isAlive()) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
