package dev.ferry.ps.net;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.PeerUnavailableException;
import dev.ferry.rpc.RpcTimeoutException;

/**
 * When a part of a batch is tried again and how long the client waits first: up to
 * {@link #attempts()} tries within {@link #budgetMillis()} of the operation's start
 * ({@link #start()}), pauses doubling from 1 ms to {@link #maxBackoffMillis()}, a routing
 * refresh after each pause, and each retry's deadline cut to what is left of the budget.
 * Thread-safe; the policy's values are replaced by {@link PsClient#retryPolicy}.
 */
final class RetryPolicy {

    /** How often the route is looked at while a retry waits for a newer one. */
    private static final long WATCH_MILLIS = 5;
    /** How often a retry that waits for a newer route asks the servers for it. */
    private static final long REFRESH_MILLIS = 100;

    private final RoutingFollower routing;
    private final long deadlineMillis;
    private final LongAdder retries = new LongAdder();
    private volatile int attempts = PsClient.DEFAULT_ATTEMPTS;
    private volatile long maxBackoffMillis = PsClient.DEFAULT_MAX_BACKOFF_MILLIS;
    private volatile long budgetMillis;

    /**
     * {@code deadlineMillis}: the calls' deadline, the longest a retry waits for a newer route;
     * the budget starts at {@link PsClient#defaultRetryBudgetMillis} of it.
     */
    RetryPolicy(RoutingFollower routing, long deadlineMillis) {
        this.routing = routing;
        this.deadlineMillis = deadlineMillis;
        this.budgetMillis = PsClient.defaultRetryBudgetMillis(deadlineMillis);
    }

    void set(int maxAttempts, long maxBackoff, long budget) {
        if (maxAttempts < 1 || maxBackoff < 1 || budget < 1) {
            throw new IllegalArgumentException("attempts, backoff and budget must be >= 1: " + maxAttempts + ", "
                    + maxBackoff + ", " + budget);
        }
        this.attempts = maxAttempts;
        this.maxBackoffMillis = maxBackoff;
        this.budgetMillis = budget;
    }

    long budgetMillis() {
        return budgetMillis;
    }

    /** The calls' deadline: a first attempt's, and the most a retry gets. */
    long deadlineMillis() {
        return deadlineMillis;
    }

    /** When an operation that starts now gives up retrying ({@link System#nanoTime()} based). */
    long start() {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMillis);
    }

    /** A retry's deadline: the calls' deadline, or what is left of the budget if that is less (at least 1 ms). */
    long retryDeadlineMillis(long giveUpAt) {
        long left = TimeUnit.NANOSECONDS.toMillis(giveUpAt - System.nanoTime());
        return Math.max(1, Math.min(deadlineMillis, left));
    }

    int attempts() {
        return attempts;
    }

    long maxBackoffMillis() {
        return maxBackoffMillis;
    }

    /** Parts sent again since connect. */
    long retries() {
        return retries.sum();
    }

    /**
     * Whether a part that failed so is tried again: after {@code WRONG_SERVER} or {@code BUSY}
     * (nothing was applied) and an unavailable server (gone or restarted; its rows are
     * reassigned); after a timeout or {@code UNCONFIRMED} (applied, a copy it owed unfinished)
     * for a pull, and for a push in a cluster run by a controller: its servers record a push's
     * dedupe id with its rows (and pass it on to backups, moves and copies), so the same push sent
     * again is applied at most once wherever it lands. A fixed cluster's servers keep no such
     * record: there such a push fails. Never for a bad request, and not once the operation's
     * budget is spent ({@code giveUpAt}, from {@link #start()}).
     */
    boolean retryable(Throwable failure, boolean idempotent, int attempt, long giveUpAt) {
        if (attempt + 1 >= attempts || giveUpAt - System.nanoTime() <= 0) {
            return false;
        }
        Throwable cause = ClientCalls.unwrap(failure);
        boolean outcomeUnknown = cause instanceof RpcTimeoutException
                || cause instanceof PsException ps && ps.code() == PsException.Code.UNCONFIRMED;
        if (outcomeUnknown) {
            return idempotent || dedupes();
        }
        if (cause instanceof PsException ps) {
            return ps.code() == PsException.Code.WRONG_SERVER || ps.code() == PsException.Code.BUSY;
        }
        return cause instanceof PeerUnavailableException;
    }

    /** Whether the servers dedupe pushes: a controller's cluster (its table names members). */
    private boolean dedupes() {
        return !routing.route().table().members().isEmpty();
    }

    /**
     * Waits the backoff of an attempt that failed at the server at {@code address}, for ids
     * such as {@code id}, then fetches a newer routing table if there is one. After a timeout or
     * an unavailable server in a cluster run by a controller, it waits until the table routes
     * {@code id} to another server (asking every server every {@value #REFRESH_MILLIS} ms, and
     * following the generations other answers carry), up to one call deadline: a dead server's
     * groups are handed to their backups once its session expires, and the part goes there at
     * once instead of waiting out another deadline at the dead one. A newer table that still
     * names the lost server (one that only dropped it as a backup, say) is not enough. A server
     * that was only slow is tried again after that wait. No wait runs past {@code giveUpAt}.
     */
    CompletableFuture<Void> pause(Throwable failure, int attempt, String address, long id, long giveUpAt) {
        retries.increment();
        long left = Math.max(0, TimeUnit.NANOSECONDS.toMillis(giveUpAt - System.nanoTime()));
        long millis = Math.min(left, Math.min(maxBackoffMillis, 1L << Math.min(attempt, 20)));
        Throwable cause = ClientCalls.unwrap(failure);
        long named = cause instanceof PsException ps ? PsDescriptor.wrongServerGeneration(ps) : -1;
        Executor later = CompletableFuture.delayedExecutor(millis, TimeUnit.MILLISECONDS);
        CompletableFuture<Void> paused = CompletableFuture.runAsync(() -> { }, later);
        boolean lost = cause instanceof PeerUnavailableException || cause instanceof RpcTimeoutException;
        if (lost && dedupes()) {
            long now = System.nanoTime();
            long byDeadline = now + TimeUnit.MILLISECONDS.toNanos(deadlineMillis);
            long until = byDeadline - giveUpAt > 0 ? giveUpAt : byDeadline;
            long refreshNow = now - TimeUnit.MILLISECONDS.toNanos(REFRESH_MILLIS + 1);
            return paused.thenCompose(v -> awaitMoved(address, id, until, refreshNow));
        }
        return paused.thenCompose(v -> {
            if (named >= 0 && named <= routing.route().generation() && attempt == 0) {
                // The server is behind the client: give it time, keep the table.
                return CompletableFuture.completedFuture(null);
            }
            return routing.refresh().handle((ok, refreshFailure) -> null);
        });
    }

    /**
     * Completes once the route sends {@code id} elsewhere than {@code address}, or at
     * {@code until}. Every {@value #REFRESH_MILLIS} ms it asks every server at once in the
     * background (asking in turn would wait out a deadline at the dead one); a newer table that
     * any answer brings is seen within {@value #WATCH_MILLIS} ms.
     */
    private CompletableFuture<Void> awaitMoved(String address, long id, long until, long lastRefresh) {
        long now = System.nanoTime();
        Route r = routing.route();
        if (!r.addresses().get(r.table().slots().serverOf(id)).equals(address) || now - until > 0) {
            return CompletableFuture.completedFuture(null);
        }
        long refreshed = lastRefresh;
        if (now - lastRefresh > TimeUnit.MILLISECONDS.toNanos(REFRESH_MILLIS)) {
            routing.refreshFromAll();
            refreshed = now;
        }
        long next = refreshed;
        return CompletableFuture.runAsync(() -> { }, CompletableFuture.delayedExecutor(WATCH_MILLIS,
                TimeUnit.MILLISECONDS)).thenCompose(v -> awaitMoved(address, id, until, next));
    }
}
