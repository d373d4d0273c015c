package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

import dev.ferry.ps.PsException;
import dev.ferry.ps.Slots;
import dev.ferry.rpc.RpcMethod;

/**
 * The wire layout of the live export, serving server (the follower) to training server
 * ({@link ExportService}, {@link DeltaFollower}). Little-endian; rows are whole rows in the format
 * of checkpoints, slot moves and replication ({@code RowLayout}: id, step count, weights,
 * optimizer state), the step count being the row's version.
 *
 * <pre>
 *  EXPORT_TABLES request: | version u8 = 1 | 7 reserved |
 *  answer:
 *   0               8               16              20              24
 *   +---------------+---------------+---------------+---------------+
 *   | log id i64    | sealed tick   | tables i32    | primaries i32 |
 *   +---------------+---------------+---------------+---------------+
 *   primaries: a hash of the slots the server is primary of, the only ones it exports (0: all,
 *   an older server); when it changes, the follower catches up with that server again
 *   per table: | length i32 | 4 reserved | a CREATE_TABLE body (PsDescriptor), padded to 8 |
 *
 *  EXPORT_ROWS request:
 *   0               8               16              24              32
 *   +---------------+---------------+---------------+---------------+
 *   | log id i64    | since tick    | up to tick    | after id i64  |
 *   +-------+-------+-------+-------+---------------+---------------+
 *  32     36      40      44      48
 *   | max  | flags | name  | 0     |   flags bit 0: the first page (after id ignored)
 *   | rows | i32   | length|       |
 *   +------+-------+-------+-------+
 *  48: the wanted slots, a bitmap of 65,536 bits (8 KiB, slot s = bit s % 64 of long s / 64)
 *  8240: the table's name, UTF-8, zero-padded to 8
 *  answer:
 *   0         4         8                 16                24        28        32
 *   +---------+---------+-----------------+-----------------+---------+---------+
 *   | status  | rows i32| row bytes i64   | last id i64     | more i32| reserved|
 *   +---------+---------+-----------------+-----------------+---------+---------+
 *   rows x whole rows, ascending by id: rows of the wanted slots changed after since (those
 *   changed after up to as well: they come again next poll)
 *   with flag bit 1 (deletions) in the request, reserved holds the tombstones i32, and after the
 *   rows: tombstones x | id i64 | floor i64 |, ascending by id: the page's ids whose deletion is
 *   remembered, with the most steps a deleted copy had (apply before the rows)
 *
 *  EXPORT_DENSE request:
 *   | log id i64 | since tick | up to tick | after-name length i32 | 0 | slot bitmap (8 KiB) |
 *   | after name (the last tensor answered; length 0 for the first), UTF-8, padded to 8 |
 *  answer: | status i32 | found i32 | 8 reserved | if found: a MOVE_DENSE body (DenseMove) |
 *   the first tensor after the name, of a wanted slot, changed after since
 *
 *  EXPORT_CHECKPOINT request: | version u8 = 1 | 7 reserved |
 *  answer:
 *   | status i32 | path length i32 | log id i64 | tick i64 | primary slots (8 KiB) |
 *   | the checkpoint's slots (8 KiB) | path, UTF-8, padded to 8 |
 *   the newest checkpoint stamped by the current log ({@code ExportStamp}); primary slots: those
 *   the server exports now; with status NO_CHECKPOINT the header only, primary slots filled
 *   (a follower's resync sweeps them, {@code ResyncSweep})
 * </pre>
 * A poll seals a tick ({@code EXPORT_TABLES}), then pages through each table's rows changed
 * since the follower's cursor up to it, each page continuing after the last id of the one before.
 * Statuses are return codes; a malformed request is refused with a {@link PsException}
 * ({@code INVALID_ARGUMENT}, {@code LENGTH_MISMATCH}) saying what is wrong.
 */
public final class ExportDescriptor {

    /** Follower to training server: seal a tick; the log's id, the tick and every sparse table's config. */
    public static final RpcMethod EXPORT_TABLES = RpcMethod.idempotent(0x5301);
    /** Follower to training server: one page of a table's rows changed in a range of ticks. */
    public static final RpcMethod EXPORT_ROWS = RpcMethod.idempotent(0x5302);
    /** Follower to training server: the next dense tensor changed since a tick, whole. */
    public static final RpcMethod EXPORT_DENSE = RpcMethod.idempotent(0x5303);
    /** Follower to training server: where its newest checkpoint stamped by its current log is. */
    public static final RpcMethod EXPORT_CHECKPOINT = RpcMethod.idempotent(0x5304);

    /** The version byte of {@code EXPORT_TABLES}. */
    public static final byte VERSION = 1;
    /** Bytes of the {@code EXPORT_TABLES} request. */
    public static final int TABLES_REQUEST = 8;
    /** Bytes of the {@code EXPORT_TABLES} answer before its tables. */
    public static final int TABLES_HEADER = 24;
    /** Bytes of the wanted-slot bitmap. */
    public static final int SLOT_BITMAP = Slots.COUNT / 8;
    /** Bytes of the {@code EXPORT_ROWS} request before the name. */
    public static final int ROWS_HEADER = 48 + SLOT_BITMAP;
    /** Bytes of the {@code EXPORT_ROWS} answer before its rows. */
    public static final int PAGE_HEADER = 32;

    /** The rows follow. */
    public static final int OK = 0;
    /** The training server's log is not the one named (it restarted): ask again from tick 0. */
    public static final int LOG_CHANGED = 1;
    /** The request names a tick not sealed yet. */
    public static final int NOT_SEALED = 2;
    /** Deletions after the cursor were forgotten (kept {@code ExportLog#retentionNanos()}): resync. */
    public static final int FORGOTTEN = 3;
    /** No checkpoint stamped by the current log ({@code EXPORT_CHECKPOINT}). */
    public static final int NO_CHECKPOINT = 4;

    /** Bytes of a tombstone after a page's rows. */
    public static final int TOMBSTONE_BYTES = 16;
    /** Bytes of the {@code EXPORT_DENSE} request before the name. */
    public static final int DENSE_HEADER = 32 + SLOT_BITMAP;
    /** Bytes of the {@code EXPORT_DENSE} answer before the tensor. */
    public static final int DENSE_ANSWER_HEADER = 16;
    /** Bytes of the {@code EXPORT_CHECKPOINT} request. */
    public static final int CHECKPOINT_REQUEST = 8;
    /** Bytes of the {@code EXPORT_CHECKPOINT} answer before the path. */
    public static final int CHECKPOINT_HEADER = 24 + 2 * SLOT_BITMAP;

    static final int FIRST_PAGE = 1;
    static final int DELETIONS = 2;

    private ExportDescriptor() {
    }

    /** Bytes of an {@code EXPORT_ROWS} request for a name of {@code nameLength} bytes. */
    public static int rowsRequestBytes(int nameLength) {
        return ROWS_HEADER + PsDescriptor.paddedNameBytes(nameLength);
    }

    /** Writes an {@code EXPORT_ROWS} request. */
    public static void writeRowsRequest(MemorySegment out, long logId, long since, long upTo, long afterId,
            boolean first, int maxRows, long[] slotBitmap, byte[] name) {
        writeRowsRequest(out, logId, since, upTo, afterId, first, false, maxRows, slotBitmap, name);
    }

    /** Writes an {@code EXPORT_ROWS} request, asking for tombstones if {@code deletions}. */
    public static void writeRowsRequest(MemorySegment out, long logId, long since, long upTo, long afterId,
            boolean first, boolean deletions, int maxRows, long[] slotBitmap, byte[] name) {
        out.set(PsDescriptor.LONG, 0, logId);
        out.set(PsDescriptor.LONG, 8, since);
        out.set(PsDescriptor.LONG, 16, upTo);
        out.set(PsDescriptor.LONG, 24, afterId);
        out.set(PsDescriptor.INT, 32, maxRows);
        out.set(PsDescriptor.INT, 36, (first ? FIRST_PAGE : 0) | (deletions ? DELETIONS : 0));
        out.set(PsDescriptor.INT, 40, name.length);
        out.set(PsDescriptor.INT, 44, 0);
        for (int i = 0; i < slotBitmap.length; i++) {
            out.set(PsDescriptor.LONG, 48 + 8L * i, slotBitmap[i]);
        }
        MemorySegment.copy(MemorySegment.ofArray(name), 0, out, ROWS_HEADER, name.length);
        out.asSlice(ROWS_HEADER + name.length, PsDescriptor.paddedNameBytes(name.length) - name.length).fill((byte) 0);
    }

    /** A decoded {@code EXPORT_ROWS} request, checked whole. */
    record RowsRequest(long logId, long since, long upTo, long afterId, boolean first, boolean deletions,
            int maxRows, MemorySegment slots, String table) {

        boolean wants(int slot) {
            return (slots.get(PsDescriptor.LONG, 8L * (slot >>> 6)) & (1L << (slot & 63))) != 0;
        }
    }

    /**
     * Decodes and checks an {@code EXPORT_ROWS} request.
     *
     * @throws PsException {@code LENGTH_MISMATCH} or {@code INVALID_ARGUMENT} naming the problem
     */
    static RowsRequest readRowsRequest(MemorySegment body, int maxRowsLimit) {
        if (body.byteSize() < ROWS_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_ROWS request takes at least "
                    + ROWS_HEADER + " bytes; this one has " + body.byteSize());
        }
        int nameLength = body.get(PsDescriptor.INT, 40);
        if (nameLength <= 0 || nameLength > 0xFFFF) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "EXPORT_ROWS: a table name of " + nameLength
                    + " bytes is outside [1, " + 0xFFFF + "]");
        }
        if (body.byteSize() != rowsRequestBytes(nameLength)) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_ROWS request with a name of "
                    + nameLength + " bytes takes " + rowsRequestBytes(nameLength) + " bytes; this one has "
                    + body.byteSize());
        }
        long since = body.get(PsDescriptor.LONG, 8);
        long upTo = body.get(PsDescriptor.LONG, 16);
        checkTicks(since, upTo, "EXPORT_ROWS");
        int maxRows = body.get(PsDescriptor.INT, 32);
        if (maxRows <= 0 || maxRows > maxRowsLimit) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "EXPORT_ROWS: " + maxRows
                    + " rows a page is outside [1, " + maxRowsLimit + "]");
        }
        int flags = body.get(PsDescriptor.INT, 36);
        if ((flags & ~(FIRST_PAGE | DELETIONS)) != 0) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "EXPORT_ROWS: unknown flags " + flags);
        }
        byte[] name = body.asSlice(ROWS_HEADER, nameLength).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        String table = new String(name, StandardCharsets.UTF_8);
        return new RowsRequest(body.get(PsDescriptor.LONG, 0), since, upTo, body.get(PsDescriptor.LONG, 24),
                (flags & FIRST_PAGE) != 0, (flags & DELETIONS) != 0, maxRows, body.asSlice(48, SLOT_BITMAP), table);
    }

    /** Bytes of an {@code EXPORT_DENSE} request after a name of {@code nameLength} bytes (0: the first). */
    public static int denseRequestBytes(int nameLength) {
        return DENSE_HEADER + (nameLength == 0 ? 0 : PsDescriptor.paddedNameBytes(nameLength));
    }

    /** Writes an {@code EXPORT_DENSE} request. */
    public static void writeDenseRequest(MemorySegment out, long logId, long since, long upTo, long[] slotBitmap,
            byte[] afterName) {
        out.set(PsDescriptor.LONG, 0, logId);
        out.set(PsDescriptor.LONG, 8, since);
        out.set(PsDescriptor.LONG, 16, upTo);
        out.set(PsDescriptor.INT, 24, afterName.length);
        out.set(PsDescriptor.INT, 28, 0);
        for (int i = 0; i < slotBitmap.length; i++) {
            out.set(PsDescriptor.LONG, 32 + 8L * i, slotBitmap[i]);
        }
        if (afterName.length > 0) {
            MemorySegment.copy(MemorySegment.ofArray(afterName), 0, out, DENSE_HEADER, afterName.length);
            out.asSlice(DENSE_HEADER + afterName.length,
                    PsDescriptor.paddedNameBytes(afterName.length) - afterName.length).fill((byte) 0);
        }
    }

    /** A decoded {@code EXPORT_DENSE} request. */
    record DenseRequest(long logId, long since, long upTo, MemorySegment slots, String afterName) {

        boolean wants(int slot) {
            return (slots.get(PsDescriptor.LONG, 8L * (slot >>> 6)) & (1L << (slot & 63))) != 0;
        }
    }

    /**
     * Decodes and checks an {@code EXPORT_DENSE} request.
     *
     * @throws PsException {@code LENGTH_MISMATCH} or {@code INVALID_ARGUMENT} naming the problem
     */
    static DenseRequest readDenseRequest(MemorySegment body) {
        if (body.byteSize() < DENSE_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_DENSE request takes at least "
                    + DENSE_HEADER + " bytes; this one has " + body.byteSize());
        }
        int nameLength = body.get(PsDescriptor.INT, 24);
        if (nameLength < 0 || nameLength > 0xFFFF) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "EXPORT_DENSE: a name of " + nameLength
                    + " bytes is outside [0, " + 0xFFFF + "]");
        }
        if (body.byteSize() != denseRequestBytes(nameLength)) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "an EXPORT_DENSE request with a name of "
                    + nameLength + " bytes takes " + denseRequestBytes(nameLength) + " bytes; this one has "
                    + body.byteSize());
        }
        long since = body.get(PsDescriptor.LONG, 8);
        long upTo = body.get(PsDescriptor.LONG, 16);
        checkTicks(since, upTo, "EXPORT_DENSE");
        String after = new String(body.asSlice(DENSE_HEADER, nameLength).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE),
                StandardCharsets.UTF_8);
        return new DenseRequest(body.get(PsDescriptor.LONG, 0), since, upTo, body.asSlice(32, SLOT_BITMAP), after);
    }

    /** A request's tick range {@code (since, upTo]}, both at offsets 8 and 16 of its body. */
    private static void checkTicks(long since, long upTo, String method) {
        if (since < 0 || upTo < since) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, method + ": ticks (" + since + ", " + upTo
                    + "] are not a range");
        }
    }
}
