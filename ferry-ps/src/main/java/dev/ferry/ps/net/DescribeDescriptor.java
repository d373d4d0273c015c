package dev.ferry.ps.net;

import static dev.ferry.ps.net.PsDescriptor.DENSE;
import static dev.ferry.ps.net.PsDescriptor.HEADER;
import static dev.ferry.ps.net.PsDescriptor.INT;
import static dev.ferry.ps.net.PsDescriptor.LONG;
import static dev.ferry.ps.net.PsDescriptor.SERVER_INFO;
import static dev.ferry.ps.net.PsDescriptor.SHORT;
import static dev.ferry.ps.net.PsDescriptor.TABLE_INFO;
import static dev.ferry.ps.net.PsDescriptor.dimension;
import static dev.ferry.ps.net.PsDescriptor.kind;
import static dev.ferry.ps.net.PsDescriptor.name;
import static dev.ferry.ps.net.PsDescriptor.nameLength;
import static dev.ferry.ps.net.PsDescriptor.payloadOffset;
import static dev.ferry.ps.net.PsDescriptor.writeHeader;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.Slots;
import dev.ferry.ps.TableStats;

/**
 * The answers that describe a server: {@code DESCRIBE} (the server's place and its tables) and
 * {@code SLOT_TABLE} (the slot table it enforces). Little-endian, as all of {@link PsDescriptor}.
 *
 * <p>A {@code DESCRIBE} response: {@value PsDescriptor#SERVER_INFO} bytes of server info
 * <pre>
 *   0               4               8              12              16              20              24
 *   +---------------+---------------+---------------+---------------+---------------+---------------+
 *   | index i32     | server count  | flags (bit 0  | tables i32    | slot-table    | reserved      |
 *   |               | i32           | read-only)    |               | hash i32      |               |
 *   +---------------+---------------+---------------+---------------+---------------+---------------+
 * </pre>
 * then per table a request-style header (kind, name length, dimension) and name, followed by
 * {@value PsDescriptor#TABLE_INFO} bytes: rows, capacity rows, bytes per row, reserved bytes
 * (4 x i64), the optimizer kind i32, the table's default pull format code i32, and the
 * optimizer's 4 parameters (f64), encoded as in {@link CreateTableDescriptor}.
 *
 * <p>A {@code SLOT_TABLE} response: the server count (i32), then the server of each of the
 * 65,536 slots (u16).
 */
final class DescribeDescriptor {

    private DescribeDescriptor() {
    }

    /** Bytes of one table's entry in a {@code DESCRIBE} response. */
    static int tableInfoBytes(int nameLength) {
        return payloadOffset(nameLength) + TABLE_INFO;
    }

    /** Writes the server info; returns the offset after it. */
    static int writeServerInfo(MemorySegment out, ServerInfo info, int slotHash) {
        out.set(INT, 0, info.index());
        out.set(INT, 4, info.serverCount());
        out.set(INT, 8, info.readOnly() ? 1 : 0);
        out.set(INT, 12, info.tables().size());
        out.set(INT, 16, slotHash);
        out.set(INT, 20, 0);
        return SERVER_INFO;
    }

    /** Writes one table's entry at {@code at}; returns the offset after it. */
    static int writeTableInfo(MemorySegment out, int at, byte kind, TableStats stats) {
        return writeTableInfo(out, at, kind, stats, PullFormat.F32);
    }

    /** Writes one table's entry, with its default pull format, at {@code at}; returns the offset after it. */
    static int writeTableInfo(MemorySegment out, int at, byte kind, TableStats stats, PullFormat format) {
        byte[] name = stats.name().getBytes(StandardCharsets.UTF_8);
        int p = at + writeHeader(out.asSlice(at), kind, name, stats.dimension(), 0, 0);
        out.set(LONG, p, stats.rows());
        out.set(LONG, p + 8, stats.capacityRows());
        out.set(LONG, p + 16, stats.bytesPerRow());
        out.set(LONG, p + 24, stats.reservedBytes());
        CreateTableDescriptor.writeOptimizer(out, p + 32, stats.optimizer());
        out.set(INT, p + 36, format.code());
        return p + TABLE_INFO;
    }

    /**
     * Decodes a {@code DESCRIBE} response.
     *
     * @throws PsException {@code LENGTH_MISMATCH} if its size disagrees with what it holds,
     *                     {@code INVALID_ARGUMENT} if a table's optimizer is unknown or invalid
     */
    static ServerInfo readDescribe(MemorySegment in, String address) {
        if (in.byteSize() < SERVER_INFO) {
            throw malformedDescribe(address, in.byteSize() + " bytes, shorter than the server info");
        }
        int index = in.get(INT, 0);
        int count = in.get(INT, 4);
        boolean readOnly = (in.get(INT, 8) & 1) != 0;
        int tables = in.get(INT, 12);
        int slotHash = in.get(INT, 16);
        // Every entry takes at least tableInfoBytes(0): the count cannot claim more than the bytes hold.
        if (tables < 0 || tables > (in.byteSize() - SERVER_INFO) / tableInfoBytes(0)) {
            throw malformedDescribe(address, tables + " tables in " + in.byteSize() + " bytes");
        }
        List<ServerInfo.Table> list = new ArrayList<>(tables);
        long at = SERVER_INFO;
        for (int t = 0; t < tables; t++) {
            if (in.byteSize() - at < HEADER) {
                throw malformedDescribe(address, "table " + t + " at byte " + at + " is cut short");
            }
            MemorySegment entry = in.asSlice(at);
            int p = payloadOffset(nameLength(entry));
            if (entry.byteSize() < p + TABLE_INFO) {
                throw malformedDescribe(address, "table " + t + " at byte " + at + " is cut short");
            }
            Optimizer optimizer = CreateTableDescriptor.readOptimizer(entry, p + 32);
            TableStats stats = new TableStats(name(entry), dimension(entry), optimizer, entry.get(LONG, p),
                    entry.get(LONG, p + 8), entry.get(LONG, p + 16), entry.get(LONG, p + 24));
            list.add(new ServerInfo.Table(kind(entry) == DENSE, stats, PullFormat.ofCode(entry.get(INT, p + 36))));
            at += p + TABLE_INFO;
        }
        if (at != in.byteSize()) {
            throw malformedDescribe(address, (in.byteSize() - at) + " bytes after the last table");
        }
        return new ServerInfo(address, index, count, readOnly, slotHash, list);
    }

    private static PsException malformedDescribe(String address, String problem) {
        return new PsException(PsException.Code.LENGTH_MISMATCH, "server " + address
                + " sent a malformed DESCRIBE response: " + problem);
    }

    /** Bytes of a {@code SLOT_TABLE} response. */
    static int slotTableBytes() {
        return Integer.BYTES + Slots.COUNT * Short.BYTES;
    }

    static void writeSlotTable(MemorySegment out, SlotTable slots) {
        out.set(INT, 0, slots.serverCount());
        for (int s = 0; s < Slots.COUNT; s++) {
            out.set(SHORT, Integer.BYTES + (long) s * Short.BYTES, (short) slots.serverOfSlot(s));
        }
    }

    static SlotTable readSlotTable(MemorySegment in) {
        if (in.byteSize() != slotTableBytes()) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a slot table of " + in.byteSize()
                    + " bytes; expected " + slotTableBytes());
        }
        int[] map = new int[Slots.COUNT];
        for (int s = 0; s < Slots.COUNT; s++) {
            map[s] = Short.toUnsignedInt(in.get(SHORT, Integer.BYTES + (long) s * Short.BYTES));
        }
        return SlotTable.of(map, in.get(INT, 0));
    }
}
