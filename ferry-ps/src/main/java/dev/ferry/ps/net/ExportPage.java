package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;

import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.Slots;

/**
 * A page of {@code EXPORT_ROWS} checked whole before any of it is applied
 * ({@link ExportDescriptor}): its rows (whole rows, ascending by id) and its tombstones (id and
 * floor, ascending by id), both views of the page.
 */
record ExportPage(MemorySegment rows, MemorySegment tombstones) {

    /** Tombstones in the page. */
    int tombstoneCount() {
        return (int) (tombstones.byteSize() / ExportDescriptor.TOMBSTONE_BYTES);
    }

    long tombstoneId(int i) {
        return tombstones.get(PsDescriptor.LONG, (long) i * ExportDescriptor.TOMBSTONE_BYTES);
    }

    long tombstoneFloor(int i) {
        return tombstones.get(PsDescriptor.LONG, (long) i * ExportDescriptor.TOMBSTONE_BYTES + 8);
    }

    /**
     * Checks a page: status, row size, length, ids ascending after {@code afterId}, each in a
     * wanted slot, no negative step count; the tombstones ascending, in wanted slots, with a floor
     * of at least 0, none after the page's last id.
     *
     * @throws PsException {@code INVALID_ARGUMENT} or {@code LENGTH_MISMATCH} naming the problem
     */
    static ExportPage check(MemorySegment page, long rowBytes, boolean first, long afterId, long[] slots) {
        if (page.byteSize() < ExportDescriptor.PAGE_HEADER) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a page of " + page.byteSize()
                    + " bytes is shorter than its header (" + ExportDescriptor.PAGE_HEADER + ")");
        }
        int status = page.get(PsDescriptor.INT, 0);
        if (status != ExportDescriptor.OK) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's status is " + status);
        }
        int count = page.get(PsDescriptor.INT, 4);
        long size = page.get(PsDescriptor.LONG, 8);
        if (size != rowBytes) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's rows are of " + size
                    + " bytes; the local table's of " + rowBytes + " (another table layout)");
        }
        int dead = page.get(PsDescriptor.INT, 28);
        if (count < 0 || dead < 0 || page.byteSize() != ExportDescriptor.PAGE_HEADER + count * rowBytes
                + (long) dead * ExportDescriptor.TOMBSTONE_BYTES) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a page of " + count + " rows of " + rowBytes
                    + " bytes and " + dead + " tombstones has " + page.byteSize() + " bytes");
        }
        int more = page.get(PsDescriptor.INT, 24);
        if (more != 0 && more != 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's more flag is " + more);
        }
        MemorySegment rows = page.asSlice(ExportDescriptor.PAGE_HEADER, count * rowBytes);
        long previous = afterId;
        for (int i = 0; i < count; i++) {
            long id = RowTransfer.idOf(rows, i * rowBytes);
            if ((!first || i > 0) && id <= previous) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "row " + i + " (id " + id
                        + ") does not follow id " + previous + ": pages are ascending by id");
            }
            checkSlot(slots, id, "row " + i);
            if (RowTransfer.stepsOf(rows, i * rowBytes) < 0) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "row " + i + " (id " + id
                        + ") has a negative step count");
            }
            previous = id;
        }
        long lastId = page.get(PsDescriptor.LONG, 16);
        if (more == 1 && count > 0 && lastId < previous) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the page's last id " + lastId
                    + " is before its last row's " + previous);
        }
        ExportPage checked = new ExportPage(rows, page.asSlice(ExportDescriptor.PAGE_HEADER + count * rowBytes));
        long before = afterId;
        for (int i = 0; i < dead; i++) {
            long id = checked.tombstoneId(i);
            if ((!first || i > 0) && id <= before) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "tombstone " + i + " (id " + id
                        + ") does not follow id " + before + ": tombstones are ascending by id");
            }
            if (more == 1 && id > lastId) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "tombstone " + i + " (id " + id
                        + ") is after the page's last id " + lastId);
            }
            checkSlot(slots, id, "tombstone " + i);
            if (checked.tombstoneFloor(i) < 0) {
                throw new PsException(PsException.Code.INVALID_ARGUMENT, "tombstone " + i + " (id " + id
                        + ") has a negative floor");
            }
            before = id;
        }
        return checked;
    }

    private static void checkSlot(long[] slots, long id, String what) {
        int slot = Slots.slotOf(id);
        if ((slots[slot >>> 6] & (1L << (slot & 63))) == 0) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, what + " (id " + id + ") is in slot " + slot
                    + ", which this server does not hold");
        }
    }
}
