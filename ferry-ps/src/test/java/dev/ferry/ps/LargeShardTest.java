package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A shard past its doubling chunks, into the 2 MiB chunks mapped for huge pages: every row keeps
 * its own values, reads without the lock see them, and a checkpoint of it restores byte for byte.
 */
class LargeShardTest {

    private static final int DIMENSION = 64;
    private static final int ROWS = 20_000;

    @Test
    void rowsInHugePageChunksKeepTheirValuesAndSurviveACheckpoint(@TempDir Path directory) {
        assertTrue(RowMemory.hugePages() || !System.getProperty("os.name").toLowerCase().contains("linux"));
        long[] ids = new long[ROWS];
        for (int i = 0; i < ROWS; i++) {
            ids[i] = i * 31L + 7;
        }
        long rowBytes = (long) DIMENSION * Float.BYTES;
        Path checkpoint;
        byte[] gathered;
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults());
                Arena arena = Arena.ofConfined()) {
            SparseTable table = server.createTable(TableConfig.of("big", DIMENSION, Optimizer.sgd(1)).withShards(1));
            MemorySegment g = arena.allocate(ROWS * rowBytes);
            for (int i = 0; i < ROWS; i++) {
                for (int j = 0; j < DIMENSION; j++) {
                    g.set(RowLayout.FLOAT, i * rowBytes + 4L * j, -value(i, j));
                }
            }
            table.apply(ids, 0, ROWS, g);
            MemorySegment out = arena.allocate(ROWS * rowBytes);
            table.gather(ids, 0, ROWS, out);
            for (int i = 0; i < ROWS; i++) {
                for (int j = 0; j < DIMENSION; j++) {
                    assertEquals(value(i, j), out.get(RowLayout.FLOAT, i * rowBytes + 4L * j), "row " + i);
                }
            }
            assertTrue(table.stats().reservedBytes() >= ROWS * (long) table.config().bytesPerRow());
            gathered = out.toArray(ValueLayout.JAVA_BYTE);
            checkpoint = server.checkpoint(directory);
        }
        try (ParameterServer restored = ParameterServer.restore(PsConfig.defaults(), checkpoint, true);
                Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ROWS * rowBytes);
            restored.table("big").gather(ids, 0, ROWS, out);
            assertArrayEquals(gathered, out.toArray(ValueLayout.JAVA_BYTE));
            assertEquals(ROWS, restored.table("big").rows());
        }
    }

    private static float value(int row, int element) {
        return (row % 1000) / 8f + element;
    }
}
