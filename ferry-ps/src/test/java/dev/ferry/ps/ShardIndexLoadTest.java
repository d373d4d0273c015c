package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * How full a shard's id index gets ({@link ShardIndex#maxLoadEighths}): at most 3/8 for rows of
 * 512 bytes or more, 5/8 for smaller ones, and never grown before half that limit; every id is
 * found at its row after each growth.
 */
class ShardIndexLoadTest {

    @Test
    void adagradRowsOf64WeightsKeepTheIndexAtMostThreeEighthsFull() {
        checkLoad(64, 1, 3, 40_000);
    }

    @Test
    void smallRowsKeepTheIndexAtMostFiveEighthsFull() {
        checkLoad(8, 0, 5, 40_000);
    }

    @Test
    void theLimitFollowsTheRowSize() {
        assertEquals(5, ShardIndex.maxLoadEighths(511));
        assertEquals(3, ShardIndex.maxLoadEighths(512));
    }

    private static void checkLoad(int dimension, int stateSlots, long eighths, int rows) {
        Shard shard = new Shard(dimension, stateSlots);
        shard.lock.lock();
        try {
            int grown = 0;
            long entries = shard.indexEntries();
            for (int row = 0; row < rows; row++) {
                shard.beginWrite();
                assertEquals(row, shard.append(1_000_003L * row, Slots.mix(1_000_003L * row)));
                shard.endWrite();
                long live = row + 1L;
                long now = shard.indexEntries();
                assertTrue(live * 8 <= now * eighths, live + " rows in " + now + " entries");
                if (now != entries) {
                    grown++;
                    entries = now;
                    // Grown only when the limit was reached: half the limit right after.
                    assertTrue(live * 16 > now * eighths, "grown early: " + live + " rows in " + now + " entries");
                }
            }
            assertTrue(grown >= 5, "grew " + grown + " times");
            assertEquals(rows, shard.checkIndex());
            for (int row = 0; row < rows; row++) {
                long id = 1_000_003L * row;
                assertEquals(row, shard.find(id, Slots.mix(id)), "id " + id);
            }
        } finally {
            shard.lock.unlock();
            shard.close();
        }
    }
}
