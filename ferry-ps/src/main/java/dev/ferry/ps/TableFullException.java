package dev.ferry.ps;

import java.io.Serial;

/**
 * A request needed a new row in a table that already holds its {@link TableConfig#maxRows()}.
 * Raised before any gradient of the request is applied; rows that the request created before
 * the table filled keep their initial values, as a pull of those ids would have left them.
 */
public final class TableFullException extends PsException {

    @Serial
    private static final long serialVersionUID = 1L;

    private final String table;
    private final long capacity;

    TableFullException(String table, long capacity, long id) {
        super(Code.TABLE_FULL, "table '" + table + "' is full: it holds its capacity of " + capacity
                + " rows and id " + id + " needs a new one (raise TableConfig.maxRows)");
        this.table = table;
        this.capacity = capacity;
    }

    /** The table that is full. */
    public String table() {
        return table;
    }

    /** Its capacity in rows. */
    public long capacity() {
        return capacity;
    }
}
