package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

/**
 * {@link Shard#weightsQuietly}, the branch-free chunk and offset of a gather's rows, against
 * {@link Shard#chunk} and {@link Shard#weightsAt} for every row of the doubling chunks and of the
 * fixed ones after them, at three row sizes: small rows (many doubling chunks), a 64-weight
 * Adagrad row, and a row above 2 MiB (no doubling chunk at all).
 */
class ShardWeightsTest {

    @Test
    void smallRowsThroughTheDoublingChunksIntoTheFixedOnes() {
        checkEveryRow(2, 0, 150_000);
    }

    @Test
    void adagradRowsOf64Weights() {
        checkEveryRow(64, 1, 20_000);
    }

    @Test
    void rowsAboveAHugePageHaveOnlyFixedChunks() {
        checkEveryRow(600_000, 0, 5);
    }

    private static void checkEveryRow(int dimension, int stateSlots, int rows) {
        Shard shard = new Shard(dimension, stateSlots);
        shard.lock.lock();
        try {
            for (int row = 0; row < rows; row++) {
                shard.beginWrite();
                assertEquals(row, shard.append(row, Slots.mix(row)));
                shard.endWrite();
            }
            MemorySegment[] chunkOf = new MemorySegment[1];
            long[] weightsAt = new long[1];
            for (int row = 0; row < rows; row++) {
                shard.weightsQuietly(row, 0, chunkOf, weightsAt);
                assertSame(shard.chunk(row), chunkOf[0], "chunk of row " + row);
                assertEquals(shard.weightsAt(row), weightsAt[0], "weights of row " + row);
            }
            // Rows past the chunks made (as a racing read may name): no chunk.
            for (int row : new int[] {rows + (1 << 22), 1 << 30, Integer.MAX_VALUE}) {
                chunkOf[0] = MemorySegment.NULL;
                shard.weightsQuietly(row, 0, chunkOf, weightsAt);
                assertNull(chunkOf[0], "row " + row);
            }
        } finally {
            shard.lock.unlock();
            shard.close();
        }
    }
}
