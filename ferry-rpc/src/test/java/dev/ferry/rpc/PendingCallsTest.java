package dev.ferry.rpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The pending-call table without I/O: slots, the overflow map, and exactly one remover per call. */
class PendingCallsTest {

    private static final RpcMethod METHOD = RpcMethod.idempotent(7);
    private static final RequestWriter NOTHING = body -> { };

    private final AtomicLong ids = new AtomicLong(1);
    private final PendingCalls table = new PendingCalls(ids);

    private Call open() {
        return table.open(null, METHOD, 0, NOTHING, 60_000, null);
    }

    @Test
    @Timeout(10)
    void aCallIsFoundByIdUntilRemovedOnce() {
        Call call = open();
        assertSame(call, table.get(call.id));
        assertEquals(1, table.size());
        assertSame(call, table.remove(call.id));
        assertNull(table.remove(call.id), "a late second reply finds nothing");
        assertFalse(table.remove(call), "nor does the deadline sweep after it");
        assertNull(table.get(call.id));
        assertEquals(0, table.size());
    }

    @Test
    @Timeout(10)
    void aCallWhoseSlotIsTakenGoesToTheOverflowAndLeavesItTheSameWay() {
        Call old = open();
        ids.addAndGet(PendingCalls.SLOTS - 1); // other channels of the client took the ids between
        Call same = open();
        assertEquals(old.id + PendingCalls.SLOTS, same.id, "the next call lands on the old call's slot");
        assertEquals(1, table.overflowed());
        assertSame(old, table.get(old.id));
        assertSame(same, table.get(same.id));
        assertEquals(2, table.size());
        assertEquals(old.id, table.watermark(), "the old call holds the watermark");
        assertTrue(table.remove(same), "removed from the overflow by its record");
        assertFalse(table.remove(same));
        assertEquals(0, table.overflowed());
        assertSame(old, table.get(old.id), "the slot's own call is untouched");
        ids.addAndGet(PendingCalls.SLOTS - 1);
        Call third = open(); // the old call's slot again, still taken: overflow again
        assertEquals(old.id + 2 * PendingCalls.SLOTS, third.id);
        assertEquals(1, table.overflowed());
        assertSame(old, table.remove(old.id));
        assertSame(third, table.remove(third.id), "removed from the overflow by its id");
        assertEquals(0, table.size());
        assertEquals(ids.get(), table.watermark(), "nothing pending: the next id");
    }

    @Test
    @Timeout(10)
    void theWatermarkIsTheLowestPendingId() {
        List<Call> calls = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            calls.add(open());
        }
        table.remove(calls.get(0).id);
        table.remove(calls.get(2).id);
        assertEquals(calls.get(1).id, table.watermark());
        table.remove(calls.get(1).id);
        assertEquals(calls.get(3).id, table.watermark());
        assertEquals(7, table.snapshot().size());
    }

    @Test
    @Timeout(30)
    void racingRemoversCompleteEachCallExactlyOnce() throws Exception {
        int rounds = 20_000; // calls, in batches of 500
        for (int round = 0; round < rounds; round += 500) {
            List<Call> calls = new ArrayList<>();
            for (int i = 0; i < 500; i++) {
                calls.add(open());
                if (i % 50 == 0) {
                    ids.addAndGet(PendingCalls.SLOTS); // some calls land in the overflow
                }
            }
            CountDownLatch start = new CountDownLatch(1);
            Set<Long> byId = java.util.concurrent.ConcurrentHashMap.newKeySet();
            Set<Long> byRecord = java.util.concurrent.ConcurrentHashMap.newKeySet();
            Thread replies = Thread.ofPlatform().start(() -> {
                await(start);
                for (Call c : calls) {
                    if (table.remove(c.id) != null) {
                        byId.add(c.id);
                    }
                }
            });
            Thread sweeper = Thread.ofPlatform().start(() -> {
                await(start);
                for (int i = calls.size() - 1; i >= 0; i--) {
                    if (table.remove(calls.get(i))) {
                        byRecord.add(calls.get(i).id);
                    }
                }
            });
            start.countDown();
            replies.join();
            sweeper.join();
            Set<Long> both = new HashSet<>(byId);
            both.retainAll(byRecord);
            assertTrue(both.isEmpty(), "removed twice: " + both);
            assertEquals(calls.size(), byId.size() + byRecord.size(), "every call removed once");
            assertEquals(0, table.size());
        }
    }

    private static void await(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }
}
