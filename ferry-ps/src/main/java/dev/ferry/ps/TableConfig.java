package dev.ferry.ps;

import java.util.Objects;

/**
 * A sparse embedding table: int64 id to a row of {@code dimension} f32 weights, with the
 * optimizer's state in the row.
 *
 * @param name        unique per server; 1 to 200 characters
 * @param dimension   weights per row, 1 to 65,536
 * @param optimizer   the update rule applied to pushed gradients
 * @param initializer the values of a row created by its first pull or push. Default zeros
 * @param maxRows     the table's capacity: a request that needs a row beyond it fails with
 *                    {@link TableFullException}. Memory is bounded by
 *                    {@code maxRows * bytesPerRow()} plus the hash index. Default 1,048,576
 * @param shards      lock stripes, a power of two from 1 to 256; each owns its hash table and its
 *                    rows. Default 16: on a server with 16 request threads, two pushers rarely wait
 *                    for the same stripe, and an empty shard costs a 1 KiB index
 * @param pullFormat  how pulls that name no format move this table's rows on the wire. Default
 *                    {@link PullFormat#F32} (exact)
 * @param admission   when an id not yet stored gets a row. Default {@link Admission#always()}
 * @param eviction    when stored rows are deleted (a TTL, a capacity with a policy). Default
 *                    {@link Eviction#none()}; its capacity is at most {@code maxRows}
 */
public record TableConfig(String name, int dimension, Optimizer optimizer, Initializer initializer, long maxRows,
        int shards, PullFormat pullFormat, Admission admission, Eviction eviction) {

    /** Default {@link #maxRows()}. */
    public static final long DEFAULT_MAX_ROWS = 1L << 20;
    /** Default {@link #shards()}. */
    public static final int DEFAULT_SHARDS = 16;
    /** The largest {@link #dimension()}. */
    public static final int MAX_DIMENSION = 1 << 16;

    /** Checks the values. */
    public TableConfig {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(optimizer, "optimizer");
        Objects.requireNonNull(initializer, "initializer");
        Objects.requireNonNull(pullFormat, "pullFormat");
        Objects.requireNonNull(admission, "admission");
        Objects.requireNonNull(eviction, "eviction");
        checkName(name);
        if (dimension < 1 || dimension > MAX_DIMENSION) {
            throw invalid("dimension must be in [1, " + MAX_DIMENSION + "]: " + dimension);
        }
        if (maxRows < 1 || maxRows > Integer.MAX_VALUE) {
            throw invalid("maxRows must be in [1, " + Integer.MAX_VALUE + "]: " + maxRows);
        }
        if (shards < 1 || shards > 256 || Integer.bitCount(shards) != 1) {
            throw invalid("shards must be a power of two in [1, 256]: " + shards);
        }
        if (eviction.capacity() > maxRows) {
            throw invalid("the eviction capacity " + eviction.capacity() + " exceeds maxRows " + maxRows);
        }
    }

    /** A table that never deletes rows. */
    public TableConfig(String name, int dimension, Optimizer optimizer, Initializer initializer, long maxRows,
            int shards, PullFormat pullFormat, Admission admission) {
        this(name, dimension, optimizer, initializer, maxRows, shards, pullFormat, admission, Eviction.none());
    }

    /** A table pulled in f32 that stores every id. */
    public TableConfig(String name, int dimension, Optimizer optimizer, Initializer initializer, long maxRows,
            int shards) {
        this(name, dimension, optimizer, initializer, maxRows, shards, PullFormat.F32, Admission.always());
    }

    /** A table with zero initial rows and the default capacity and shards. */
    public static TableConfig of(String name, int dimension, Optimizer optimizer) {
        return new TableConfig(name, dimension, optimizer, Initializer.zeros(), DEFAULT_MAX_ROWS, DEFAULT_SHARDS);
    }

    /** This table with another initializer. */
    public TableConfig withInitializer(Initializer value) {
        return new TableConfig(name, dimension, optimizer, value, maxRows, shards, pullFormat, admission, eviction);
    }

    /** This table with another capacity. */
    public TableConfig withMaxRows(long value) {
        return new TableConfig(name, dimension, optimizer, initializer, value, shards, pullFormat, admission, eviction);
    }

    /** This table with another number of shards. */
    public TableConfig withShards(int value) {
        return new TableConfig(name, dimension, optimizer, initializer, maxRows, value, pullFormat, admission, eviction);
    }

    /** This table with another default pull format. */
    public TableConfig withPullFormat(PullFormat value) {
        return new TableConfig(name, dimension, optimizer, initializer, maxRows, shards, value, admission, eviction);
    }

    /** This table with another admission rule. */
    public TableConfig withAdmission(Admission value) {
        return new TableConfig(name, dimension, optimizer, initializer, maxRows, shards, pullFormat, value, eviction);
    }

    /** This table with other eviction settings. */
    public TableConfig withEviction(Eviction value) {
        return new TableConfig(name, dimension, optimizer, initializer, maxRows, shards, pullFormat, admission, value);
    }

    /** This table deleting rows not updated for {@code ttl} (keeping its capacity setting, if any). */
    public TableConfig evictAfter(java.time.Duration ttl) {
        return withEviction(eviction.withTtl(ttl));
    }

    /**
     * This table holding at most {@code rows} rows, trimmed in the background to
     * {@code rows x (1 - margin)} by {@code policy} when over {@code rows x (1 - margin / 2)}
     * ({@link Eviction}; keeping its TTL, if any). Raises
     * {@link #maxRows()} to {@code rows} if it is lower.
     */
    public TableConfig capacity(long rows, EvictionPolicy policy, double margin) {
        Eviction e = eviction.withCapacity(rows, policy, margin);
        return new TableConfig(name, dimension, optimizer, initializer, Math.max(maxRows, rows), shards, pullFormat,
                admission, e);
    }

    /** This table storing an id at its {@code count}-th sighting ({@link Admission#after(int)}). */
    public TableConfig admitAfter(int count) {
        return withAdmission(Admission.after(count));
    }

    /** This table storing an id with probability {@code p} per sighting ({@link Admission#probability}). */
    public TableConfig admitProbability(double p) {
        return withAdmission(Admission.probability(p));
    }

    /**
     * Bytes of one row in memory and in checkpoints: id, step count, weights and optimizer
     * state. The hash index adds 26 to 51 bytes per row (16-byte entries, at most 5/8 full), or
     * 43 to 85 for rows of 512 bytes or more (at most 3/8 full: fewer probes per lookup).
     */
    public int bytesPerRow() {
        return (int) RowLayout.rowBytes(dimension, optimizer.stateSlots());
    }

    static void checkName(String name) {
        if (name.isEmpty() || name.length() > 200) {
            throw invalid("a name has 1 to 200 characters: '" + name + "'");
        }
    }

    static PsException invalid(String message) {
        return new PsException(PsException.Code.INVALID_ARGUMENT, message);
    }
}
