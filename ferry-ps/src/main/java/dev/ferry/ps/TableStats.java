package dev.ferry.ps;

/**
 * A snapshot of one table or dense tensor.
 *
 * @param name          the table
 * @param dimension     weights per row (a dense tensor's length)
 * @param optimizer     its optimizer
 * @param rows          rows stored (1 for a dense tensor)
 * @param capacityRows  the most rows it may hold ({@link TableConfig#maxRows()}; 1 for a dense tensor)
 * @param bytesPerRow   bytes of one row with its optimizer state ({@link TableConfig#bytesPerRow()})
 * @param reservedBytes off-heap bytes it holds now: row storage and hash index
 */
public record TableStats(String name, int dimension, Optimizer optimizer, long rows, long capacityRows,
        long bytesPerRow, long reservedBytes) {
}
