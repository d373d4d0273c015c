package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The deduplication table without I/O. */
class DedupeTableTest {

    @Test
    @Timeout(10)
    void retryOfARunningCallWaitsAndOfADoneCallReplays() {
        DedupeTable table = new DedupeTable(100, 1 << 20, Long.MAX_VALUE);
        assertEquals(DedupeTable.Verdict.RUN, table.admit(1, 10, 0, "a").verdict());
        assertEquals(DedupeTable.Verdict.RUNNING, table.admit(1, 10, 0, "b").verdict());
        assertSame("b", table.complete(1, 10, new byte[] {1, 2}), "the outcome goes to the latest sender");
        DedupeTable.Admission again = table.admit(1, 10, 0, "c");
        assertEquals(DedupeTable.Verdict.DONE, again.verdict());
        assertArrayEquals(new byte[] {1, 2}, again.entry().outcome);
        assertEquals(DedupeTable.Verdict.RUN, table.admit(2, 10, 0, "x").verdict(), "clients are separate");
    }

    @Test
    @Timeout(10)
    void acknowledgementTrimsAndRaisesTheFloor() {
        DedupeTable table = new DedupeTable(100, 1 << 20, Long.MAX_VALUE);
        for (long id = 1; id <= 5; id++) {
            table.admit(1, id, 0, "p");
            table.complete(1, id, new byte[8]);
        }
        assertEquals(5, table.size());
        table.acknowledge(1, 4);
        assertEquals(2, table.size());
        assertEquals(DedupeTable.Verdict.LOST, table.admit(1, 2, 0, "p").verdict(), "a trimmed call never runs again");
        assertEquals(DedupeTable.Verdict.DONE, table.admit(1, 4, 0, "p").verdict());
        assertEquals(DedupeTable.Verdict.RUN, table.admit(1, 6, 6, "p").verdict());
        assertEquals(1, table.size());
    }

    @Test
    @Timeout(10)
    void boundsEvictTheOldestDoneEntries() {
        DedupeTable table = new DedupeTable(3, 1 << 20, Long.MAX_VALUE);
        table.admit(1, 1, 0, "p"); // stays running
        for (long id = 2; id <= 6; id++) {
            table.admit(1, id, 0, "p");
            table.complete(1, id, new byte[8]);
        }
        assertEquals(3, table.size());
        assertEquals(DedupeTable.Verdict.RUNNING, table.admit(1, 1, 0, "p").verdict(), "running entries stay");
        assertEquals(DedupeTable.Verdict.LOST, table.admit(1, 2, 0, "p").verdict());
        assertEquals(DedupeTable.Verdict.DONE, table.admit(1, 6, 0, "p").verdict());

        DedupeTable bytes = new DedupeTable(100, 20, Long.MAX_VALUE);
        for (long id = 1; id <= 4; id++) {
            bytes.admit(1, id, 0, "p");
            bytes.complete(1, id, new byte[8]);
        }
        assertEquals(2, bytes.size());
    }

    @Test
    @Timeout(10)
    void silentClientsExpire() {
        DedupeTable table = new DedupeTable(100, 1 << 20, 1_000);
        table.admit(1, 1, 0, "p");
        table.complete(1, 1, new byte[1]);
        table.expire(System.nanoTime() + 1_000_000);
        assertEquals(0, table.size());
    }
}
