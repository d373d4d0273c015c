package dev.ferry.ps;

/**
 * Told of each row of a {@link SparseTable} that a push or a merge changed, and of each row the
 * evictor deleted ({@link SparseTable#onChange}). Called on the writing thread under the row's shard lock, after
 * the row holds its new values: it must be short, must not block and must not call the table.
 */
@FunctionalInterface
public interface RowListener {

    /** The row of {@code id} changed. */
    void changed(long id);

    /**
     * The row of {@code id}, which had {@code steps} optimizer steps, was deleted (evicted); called
     * after it left the table. Nothing by default.
     */
    default void removed(long id, long steps) {
    }
}
