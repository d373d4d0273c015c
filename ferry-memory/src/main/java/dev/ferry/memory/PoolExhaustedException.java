package dev.ferry.memory;

import java.io.Serial;

/**
 * A blocking allocation waited its whole timeout and its pool still had no room. The message
 * names the pool, the request, the pool's quota and its use at the time.
 */
public final class PoolExhaustedException extends RuntimeException {

    @Serial
    private static final long serialVersionUID = 1L;

    private final PoolKind pool;

    PoolExhaustedException(PoolKind pool, String message) {
        super(message);
        this.pool = pool;
    }

    /** The pool that had no room. */
    public PoolKind pool() {
        return pool;
    }
}
