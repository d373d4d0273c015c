package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One lock stripe of a sparse table: an open-addressing hash index from id to row number, and
 * the rows themselves ({@link RowLayout}) in off-heap chunks that never move.
 *
 * <pre>
 *  index (power-of-two entries, linear probing, at most 5/8 full)     rows (append-only chunks)
 *  +-----------+-------------+                                        chunk 0: row 0 | row 1 | ...
 *  | id  i64   | row + 1 i64 |  row + 1 == 0: empty entry  ------->   chunk 1: row c | ...
 *  +-----------+-------------+
 * </pre>
 * Rows are never deleted, so a row number stays valid for the life of the shard and growing the
 * index rehashes only the 16-byte entries (the ids are read back from the rows). Rows of a
 * chunk are contiguous, so a snapshot is one copy per chunk.
 *
 * <p>Not thread-safe: every method is called with {@link #lock} held. The row chunks and each
 * generation of the index come from shared arenas that this shard owns and closes.
 */
final class Shard {

    static final long INDEX_ENTRY_BYTES = 16;
    private static final long MIN_INDEX_ENTRIES = 64;
    /** Rows per chunk are chosen so that a chunk is at most 256 KiB: small tables stay small. */
    private static final long CHUNK_TARGET_BYTES = 256 << 10;

    final ReentrantLock lock = new ReentrantLock();
    private final long rowBytes;
    private final int chunkShift;
    private final Arena rowArena = Arena.ofShared();
    private MemorySegment[] chunks = new MemorySegment[4];
    private int chunkCount;
    private int rows;
    private Arena indexArena;
    private MemorySegment index;
    private long indexMask;
    private boolean closed;

    Shard(long rowBytes) {
        this.rowBytes = rowBytes;
        this.chunkShift = 63 - Long.numberOfLeadingZeros(Math.max(1, CHUNK_TARGET_BYTES / rowBytes));
        newIndex(MIN_INDEX_ENTRIES);
    }

    /** The row of {@code id}, or -1. */
    int find(long id, long hash) {
        long mask = indexMask;
        for (long i = hash & mask;; i = (i + 1) & mask) {
            long at = i * INDEX_ENTRY_BYTES;
            long ref = index.get(ValueLayout.JAVA_LONG, at + 8);
            if (ref == 0) {
                return -1;
            }
            if (index.get(ValueLayout.JAVA_LONG, at) == id) {
                return (int) (ref - 1);
            }
        }
    }

    /** Adds a zeroed row for {@code id}, which must be absent, and returns its number. */
    int append(long id, long hash) {
        long entries = indexMask + 1;
        if ((rows + 1L) * 8 > entries * 5) {
            rehash(entries * 2);
        }
        int row = rows;
        int chunk = row >>> chunkShift;
        if (chunk == chunkCount) {
            if (chunkCount == chunks.length) {
                chunks = Arrays.copyOf(chunks, chunkCount * 2);
            }
            chunks[chunkCount++] = rowArena.allocate(rowBytes << chunkShift, Long.BYTES);
        }
        rows++;
        insert(id, hash, row);
        return row;
    }

    /** The chunk that holds {@code row}. */
    MemorySegment chunk(int row) {
        return chunks[row >>> chunkShift];
    }

    /** The offset of {@code row} in its chunk. */
    long offset(int row) {
        return (row & ((1L << chunkShift) - 1)) * rowBytes;
    }

    int rows() {
        return rows;
    }

    long reservedBytes() {
        return closed ? 0 : chunkCount * (rowBytes << chunkShift) + (indexMask + 1) * INDEX_ENTRY_BYTES;
    }

    /** A copy of all rows, in row order, allocated from {@code arena}. */
    MemorySegment snapshot(Arena arena) {
        MemorySegment copy = arena.allocate(Math.max(1, rows * rowBytes), Long.BYTES).asSlice(0, rows * rowBytes);
        long chunkRows = 1L << chunkShift;
        for (int c = 0; c < chunkCount; c++) {
            long n = Math.min(chunkRows, rows - c * chunkRows);
            MemorySegment.copy(chunks[c], 0, copy, c * chunkRows * rowBytes, n * rowBytes);
        }
        return copy;
    }

    boolean closed() {
        return closed;
    }

    void close() {
        if (!closed) {
            closed = true;
            rowArena.close();
            indexArena.close();
            chunks = new MemorySegment[0];
        }
    }

    private void insert(long id, long hash, int row) {
        long mask = indexMask;
        long i = hash & mask;
        while (index.get(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8) != 0) {
            i = (i + 1) & mask;
        }
        index.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES, id);
        index.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8, row + 1L);
    }

    private void newIndex(long entries) {
        indexArena = Arena.ofShared();
        index = indexArena.allocate(entries * INDEX_ENTRY_BYTES, Long.BYTES);
        indexMask = entries - 1;
    }

    private void rehash(long entries) {
        Arena old = indexArena;
        newIndex(entries);
        for (int row = 0; row < rows; row++) {
            long id = chunk(row).get(RowLayout.LONG, offset(row) + RowLayout.ID_OFFSET);
            insert(id, Slots.mix(id), row);
        }
        old.close();
    }
}
