package dev.ferry.ps;

import java.time.Duration;
import java.util.Objects;

/**
 * When a sparse table deletes rows, done in the background by its server's evictor
 * ({@link TableEvictor}); see {@code docs/eviction.md}.
 *
 * <ul>
 *   <li>{@code ttl}: a row not updated (pushed to, or created) for longer than this is deleted.
 *       Zero: never.</li>
 *   <li>{@code capacity}: the table never stores more than this many rows. When the evictor finds
 *       more than {@code capacity x (1 - margin / 2)} rows ({@link #trigger()}), it deletes the
 *       first rows of {@code policy}'s order down to {@code capacity x (1 - margin)}
 *       ({@link #target()}): each pass deletes at least half the margin, so its cost (a look at
 *       every row) is spread over many rows, and the other half absorbs new rows between runs.
 *       A new id that finds the table at its capacity is not stored: its pull answers the
 *       initializer's values and its push is dropped, as for an id not admitted. Zero: no
 *       bound but {@link TableConfig#maxRows()}.</li>
 * </ul>
 * A deleted row is gone: a later pull of its id answers the initializer's values like a
 * never-seen id's, and a later sighting goes through the table's {@link Admission} rule again.
 *
 * @param ttlNanos  time since the last update after which a row is deleted, in nanoseconds; 0: never
 * @param capacity  the most rows the table stores, 0 for no bound; at most {@link TableConfig#maxRows()}
 * @param policy    which rows go first when the evictor trims the table
 * @param margin    the share of {@code capacity} kept free for new rows between evictor runs, in [0, 0.5]
 */
public record Eviction(long ttlNanos, long capacity, EvictionPolicy policy, double margin) {

    private static final Eviction NONE = new Eviction(0, 0, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0);

    /** Checks the values. */
    public Eviction {
        Objects.requireNonNull(policy, "policy");
        if (ttlNanos < 0) {
            throw TableConfig.invalid("an eviction TTL must be positive: " + ttlNanos + " ns");
        }
        if (capacity < 0 || capacity > Integer.MAX_VALUE) {
            throw TableConfig.invalid("an eviction capacity must be in [0, " + Integer.MAX_VALUE + "] (0: none): "
                    + capacity);
        }
        if (!(margin >= 0 && margin <= 0.5)) {
            throw TableConfig.invalid("an eviction margin must be in [0, 0.5]: " + margin);
        }
    }

    /** No eviction (the default): rows live until the table is closed. */
    public static Eviction none() {
        return NONE;
    }

    /** Rows not updated for {@code ttl} are deleted. */
    public static Eviction afterIdle(Duration ttl) {
        return NONE.withTtl(ttl);
    }

    /** At most {@code rows} rows, trimmed to {@code rows x (1 - margin)} by {@code policy}. */
    public static Eviction capacity(long rows, EvictionPolicy policy, double margin) {
        if (rows < 1) {
            throw TableConfig.invalid("an eviction capacity must be in [1, " + Integer.MAX_VALUE + "]: " + rows);
        }
        return new Eviction(0, rows, policy, margin);
    }

    /** These settings with a TTL on the last update as well. */
    public Eviction withTtl(Duration ttl) {
        Objects.requireNonNull(ttl, "ttl");
        if (ttl.isNegative() || ttl.isZero()) {
            throw TableConfig.invalid("an eviction TTL must be positive: " + ttl);
        }
        long nanos;
        try {
            nanos = ttl.toNanos();
        } catch (ArithmeticException tooLong) {
            nanos = Long.MAX_VALUE;
        }
        return new Eviction(nanos, capacity, policy, margin);
    }

    /** These settings with a capacity as well. */
    public Eviction withCapacity(long rows, EvictionPolicy value, double marginValue) {
        Eviction c = capacity(rows, value, marginValue);
        return new Eviction(ttlNanos, c.capacity, c.policy, c.margin);
    }

    /** Whether rows are ever deleted. */
    public boolean enabled() {
        return ttlNanos > 0 || capacity > 0;
    }

    /** Whether a TTL is set. */
    public boolean hasTtl() {
        return ttlNanos > 0;
    }

    /** Whether a capacity is set. */
    public boolean hasCapacity() {
        return capacity > 0;
    }

    /** The rows the evictor trims the table down to: {@code floor(capacity x (1 - margin))}, at least 1. */
    public long target() {
        return Math.max(1, (long) Math.floor(capacity * (1 - margin)));
    }

    /** Above this many rows the evictor trims: {@code floor(capacity x (1 - margin / 2))}, at least {@link #target()}. */
    public long trigger() {
        return Math.max(target(), (long) Math.floor(capacity * (1 - margin / 2)));
    }
}
