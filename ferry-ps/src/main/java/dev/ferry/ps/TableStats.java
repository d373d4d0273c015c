package dev.ferry.ps;

/**
 * A snapshot of one table or dense tensor.
 *
 * @param name            the table
 * @param dimension       weights per row (a dense tensor's length)
 * @param optimizer       its optimizer
 * @param rows            rows stored (1 for a dense tensor)
 * @param capacityRows    the most rows it may hold ({@link TableConfig#maxRows()}; 1 for a dense tensor)
 * @param bytesPerRow     bytes of one row with its optimizer state ({@link TableConfig#bytesPerRow()})
 * @param reservedBytes   off-heap bytes it holds now: row storage and hash index
 * @param admitted        rows created by a pull or push (every new row under {@link Admission#always()})
 * @param rejected        sightings of ids not stored: not admitted, or refused at the eviction capacity
 * @param refusedFull     of {@code rejected}, those refused because the table was at its {@link Eviction#capacity()}
 * @param evictedTtl      rows deleted for not being updated within the {@link Eviction} TTL
 * @param evictedCapacity rows deleted by the {@link Eviction} policy to stay below the capacity
 */
public record TableStats(String name, int dimension, Optimizer optimizer, long rows, long capacityRows,
        long bytesPerRow, long reservedBytes, long admitted, long rejected, long refusedFull, long evictedTtl,
        long evictedCapacity) {

    /** A snapshot without counters (a dense tensor's, or one read from the wire, which carries none). */
    public TableStats(String name, int dimension, Optimizer optimizer, long rows, long capacityRows, long bytesPerRow,
            long reservedBytes) {
        this(name, dimension, optimizer, rows, capacityRows, bytesPerRow, reservedBytes, 0, 0, 0, 0, 0);
    }

    /** The sum of two servers' snapshots of one table (the configuration is this one's). */
    public TableStats plus(TableStats o) {
        return new TableStats(name, dimension, optimizer, rows + o.rows, capacityRows + o.capacityRows, bytesPerRow,
                reservedBytes + o.reservedBytes, admitted + o.admitted, rejected + o.rejected,
                refusedFull + o.refusedFull, evictedTtl + o.evictedTtl, evictedCapacity + o.evictedCapacity);
    }
}
