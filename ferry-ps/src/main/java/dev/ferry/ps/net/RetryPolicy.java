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
 * {@link #attempts()} tries, pauses doubling from 1 ms to {@link #maxBackoffMillis()}, a routing
 * refresh after each pause. Thread-safe; the policy's two values are replaced by
 * {@link PsClient#retryPolicy}.
 */
final class RetryPolicy {

    private final RoutingFollower routing;
    private final LongAdder retries = new LongAdder();
    private volatile int attempts = PsClient.DEFAULT_ATTEMPTS;
    private volatile long maxBackoffMillis = PsClient.DEFAULT_MAX_BACKOFF_MILLIS;

    RetryPolicy(RoutingFollower routing) {
        this.routing = routing;
    }

    void set(int maxAttempts, long maxBackoff) {
        if (maxAttempts < 1 || maxBackoff < 1) {
            throw new IllegalArgumentException("attempts and backoff must be >= 1: " + maxAttempts + ", " + maxBackoff);
        }
        this.attempts = maxAttempts;
        this.maxBackoffMillis = maxBackoff;
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
     * Whether a part that failed so is tried again: after {@code WRONG_SERVER} (nothing was
     * applied), or an unavailable server (gone or restarted; its rows are reassigned), and for a
     * pull also after a timeout. Never for a bad request.
     */
    boolean retryable(Throwable failure, boolean idempotent, int attempt) {
        if (attempt + 1 >= attempts) {
            return false;
        }
        Throwable cause = ClientCalls.unwrap(failure);
        if (cause instanceof PsException ps) {
            return ps.code() == PsException.Code.WRONG_SERVER;
        }
        return cause instanceof PeerUnavailableException || idempotent && cause instanceof RpcTimeoutException;
    }

    /** Waits the backoff of an attempt, then fetches a newer routing table if there is one. */
    CompletableFuture<Void> pause(Throwable failure, int attempt) {
        retries.increment();
        long millis = Math.min(maxBackoffMillis, 1L << Math.min(attempt, 20));
        Throwable cause = ClientCalls.unwrap(failure);
        long named = cause instanceof PsException ps ? PsDescriptor.wrongServerGeneration(ps) : -1;
        Executor later = CompletableFuture.delayedExecutor(millis, TimeUnit.MILLISECONDS);
        return CompletableFuture.runAsync(() -> { }, later).thenCompose(v -> {
            if (named >= 0 && named <= routing.route().generation() && attempt == 0) {
                // The server is behind the client: give it time, keep the table.
                return CompletableFuture.completedFuture(null);
            }
            return routing.refresh().handle((ok, refreshFailure) -> null);
        });
    }
}
