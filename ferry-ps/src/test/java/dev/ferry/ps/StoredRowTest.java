package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * A shard stores rows apart from their {@link RowLayout} form (weights, then records): every row
 * written in that form reads back byte for byte, whatever the dimension and state slots, across
 * chunks; snapshots are the same bytes; and weights and state start on cache lines where the
 * layout promises it.
 */
class StoredRowTest {

    private static final int[] DIMENSIONS = {1, 2, 3, 9, 16, 37, 64, 100};

    @Test
    void rowsReadBackByteForByteAndSnapshotsAreTheirRowLayoutForm() {
        SplittableRandom random = new SplittableRandom(11);
        for (int dimension : DIMENSIONS) {
            for (int slots = 0; slots <= 2; slots++) {
                Shard shard = new Shard(dimension, slots);
                long rowBytes = RowLayout.rowBytes(dimension, slots);
                int n = 9000; // chunk 0 holds at most 8,192 rows: every case spans chunks
                shard.lock.lock();
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment rows = arena.allocate(n * rowBytes, 8);
                    byte[] bytes = new byte[4 * dimension * (1 + slots)];
                    shard.beginWrite();
                    for (int i = 0; i < n; i++) {
                        long at = i * rowBytes;
                        long id = random.nextLong();
                        rows.set(RowLayout.LONG, at + RowLayout.ID_OFFSET, id);
                        rows.set(RowLayout.LONG, at + RowLayout.STEPS_OFFSET, random.nextLong(0, 1L << 40));
                        random.nextBytes(bytes); // NaN payloads too
                        MemorySegment.copy(bytes, 0, rows, ValueLayout.JAVA_BYTE, at + RowLayout.WEIGHTS_OFFSET,
                                bytes.length);
                        int row = shard.append(id, Slots.mix(id));
                        assertEquals(i, row);
                        shard.writeRow(row, rows, at);
                        shard.touch(row, 1000 + i);
                    }
                    shard.endWrite();
                    MemorySegment one = arena.allocate(rowBytes, 8);
                    for (int i = 0; i < n; i += 7) {
                        one.fill((byte) 0x5a);
                        shard.readRow(i, one, 0);
                        assertArrayEquals(rows.asSlice(i * rowBytes, rowBytes).toArray(ValueLayout.JAVA_BYTE),
                                one.toArray(ValueLayout.JAVA_BYTE), "dimension " + dimension + ", slots " + slots
                                        + ", row " + i);
                        assertEquals(1000 + i, shard.stamp(i));
                        assertEquals(rows.get(RowLayout.LONG, i * rowBytes + RowLayout.ID_OFFSET), shard.id(i));
                    }
                    assertArrayEquals(rows.toArray(ValueLayout.JAVA_BYTE), shard.snapshot(arena).toArray(ValueLayout.JAVA_BYTE));
                    StoredRow layout = shard.layout();
                    for (int i = 0; i < n; i++) {
                        long w = shard.chunk(i).address() + shard.weightsAt(i);
                        long r = shard.chunk(i).address() + shard.recordAt(i);
                        if (dimension % 16 == 0) {
                            assertEquals(0, w % 64, "weights on a cache line, row " + i);
                        }
                        if (4L * dimension * slots >= 64) {
                            assertEquals(0, r % 64, "state on a cache line, row " + i);
                        }
                        assertEquals(0, r % 8);
                        assertEquals(0, layout.id % 8);
                    }
                } finally {
                    shard.close();
                    shard.lock.unlock();
                }
            }
        }
    }

    /**
     * {@link Shard#preloadLines} (the cache-line touches of a gather and a push) reads one long at the start of every
     * 64-byte line of the row's weights and of its record, no more, and writes nothing: its sum
     * is that of those longs, whatever the dimension (one line up to thirteen, the loop past
     * eight), and the rows read back unchanged.
     */
    @Test
    void preloadReadsEachLineOfTheRowOnceAndChangesNothing() {
        SplittableRandom random = new SplittableRandom(12);
        for (int dimension : DIMENSIONS) {
            for (int slots = 0; slots <= 2; slots++) {
                Shard shard = new Shard(dimension, slots);
                StoredRow layout = shard.layout();
                long rowBytes = RowLayout.rowBytes(dimension, slots);
                int n = 9000;
                shard.lock.lock();
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment rows = arena.allocate(n * rowBytes, 8);
                    byte[] bytes = new byte[(int) rowBytes];
                    shard.beginWrite();
                    for (int i = 0; i < n; i++) {
                        random.nextBytes(bytes);
                        MemorySegment.copy(bytes, 0, rows, ValueLayout.JAVA_BYTE, i * rowBytes, bytes.length);
                        long id = rows.get(RowLayout.LONG, i * rowBytes + RowLayout.ID_OFFSET);
                        shard.writeRow(shard.append(id, Slots.mix(id)), rows, i * rowBytes);
                    }
                    shard.endWrite();
                    byte[] before = shard.snapshot(arena).toArray(ValueLayout.JAVA_BYTE);
                    for (int row = 0; row < n; row++) {
                        MemorySegment chunk = shard.chunk(row);
                        long expected = 0;
                        for (long at = 0; at < layout.weightStride; at += 64) {
                            expected += chunk.get(RowLayout.LONG, shard.weightsAt(row) + at);
                        }
                        for (long at = 0; at < layout.recordStride; at += 64) {
                            expected += chunk.get(RowLayout.LONG, shard.recordAt(row) + at);
                        }
                        long preloaded = Shard.preloadLines(chunk, shard.weightsAt(row), shard.weightLines())
                                + Shard.preloadLines(chunk, shard.recordAt(row), shard.recordLines());
                        assertEquals(expected, preloaded, "dimension " + dimension + ", slots " + slots
                                + ", row " + row);
                    }
                    assertArrayEquals(before, shard.snapshot(arena).toArray(ValueLayout.JAVA_BYTE));
                } finally {
                    shard.close();
                    shard.lock.unlock();
                }
            }
        }
    }
}
