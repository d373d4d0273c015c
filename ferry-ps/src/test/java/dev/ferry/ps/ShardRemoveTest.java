package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Deleting rows from a shard: the index (backward-shift deletion) and the free list against a map. */
class ShardRemoveTest {

    /** Rows of 2 weights and no optimizer state: 24 bytes in {@link RowLayout}. */
    private static final long ROW_BYTES = 24;

    @Test
    void randomInsertsAndRemovesKeepTheIndexExact() {
        Shard shard = new Shard(2, 0);
        SplittableRandom random = new SplittableRandom(5);
        Map<Long, Integer> reference = new HashMap<>();
        List<Long> present = new ArrayList<>();
        int maxLive = 0;
        shard.lock.lock();
        try {
            for (int op = 0; op < 200_000; op++) {
                // Grow to about 3,000 rows, then churn around 1,500: removals with wrapped probe runs.
                boolean insert = present.isEmpty() || random.nextInt(100) < (op < 20_000 ? 70 : 50);
                if (insert) {
                    long id = random.nextLong(0, 12_000) - 6_000;
                    if (reference.containsKey(id)) {
                        continue;
                    }
                    shard.beginWrite();
                    int row = shard.append(id, Slots.mix(id));
                    assertEquals(id, shard.id(row), "append writes the id");
                    shard.endWrite();
                    reference.put(id, row);
                    present.add(id);
                } else {
                    int at = random.nextInt(present.size());
                    long id = present.get(at);
                    present.set(at, present.get(present.size() - 1));
                    present.remove(present.size() - 1);
                    int row = reference.remove(id);
                    assertEquals(row, shard.find(id, Slots.mix(id)));
                    shard.beginWrite();
                    shard.remove(row);
                    shard.endWrite();
                    assertEquals(-1, shard.find(id, Slots.mix(id)), "removed id " + id);
                    assertFalse(shard.live(row));
                }
                maxLive = Math.max(maxLive, reference.size());
                if (op % 1_000 == 0) {
                    check(shard, reference);
                }
            }
            check(shard, reference);
            assertEquals(reference.size(), shard.liveRows());
            assertEquals(maxLive, shard.rows(), "slots are reused: as many as the most rows held at once");
        } finally {
            shard.close();
            shard.lock.unlock();
        }
    }

    @Test
    void snapshotSkipsFreeSlotsAndReusedSlotsAreZeroed() {
        Shard shard = new Shard(2, 0);
        shard.lock.lock();
        try (Arena arena = Arena.ofConfined()) {
            shard.beginWrite();
            for (long id = 1; id <= 10; id++) {
                int row = shard.append(id, Slots.mix(id));
                shard.chunk(row).set(RowLayout.LONG, shard.weightsAt(row), id * 100);
            }
            for (long id = 2; id <= 10; id += 3) { // 2, 5, 8
                shard.remove(shard.find(id, Slots.mix(id)));
            }
            shard.endWrite();
            MemorySegment copy = shard.snapshot(arena);
            assertEquals(7 * ROW_BYTES, copy.byteSize());
            Set<Long> ids = new HashSet<>();
            for (long at = 0; at < copy.byteSize(); at += ROW_BYTES) {
                long id = copy.get(RowLayout.LONG, at + RowLayout.ID_OFFSET);
                assertEquals(id * 100, copy.get(RowLayout.LONG, at + RowLayout.WEIGHTS_OFFSET));
                ids.add(id);
            }
            assertEquals(Set.of(1L, 3L, 4L, 6L, 7L, 9L, 10L), ids);
            shard.beginWrite();
            int reused = shard.append(42, Slots.mix(42));
            shard.endWrite();
            assertTrue(reused < 10, "a free slot is taken before a new one");
            assertEquals(0, shard.chunk(reused).get(RowLayout.LONG, shard.weightsAt(reused)));
            assertEquals(0, shard.steps(reused));
            assertEquals(42, shard.id(reused));
            assertEquals(10, shard.rows());
            assertEquals(8, shard.liveRows());
        } finally {
            shard.close();
            shard.lock.unlock();
        }
    }

    private static void check(Shard shard, Map<Long, Integer> reference) {
        for (Map.Entry<Long, Integer> e : reference.entrySet()) {
            assertEquals(e.getValue(), shard.find(e.getKey(), Slots.mix(e.getKey())), "id " + e.getKey());
        }
        int live = 0;
        for (int row = 0; row < shard.rows(); row++) {
            if (shard.live(row)) {
                live++;
                long id = shard.id(row);
                assertEquals(row, reference.get(id));
            }
        }
        assertEquals(reference.size(), live);
    }
}
