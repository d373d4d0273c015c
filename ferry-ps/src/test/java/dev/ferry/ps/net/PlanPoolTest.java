package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.SlotTable;
import org.junit.jupiter.api.Test;

/**
 * {@link PlanPool}: a plan is never handed to two holders at once, a full pool drops what it is
 * given and so does it a plan of a batch above its largest, an empty one makes new plans, and
 * plans given back are the ones taken next. {@link PushLease}: a plan goes back once, when its
 * push succeeded and no request writer is inside it; a writer after the push ended is refused;
 * a failed push drops its plan.
 */
class PlanPoolTest {

    @Test
    void aPlanGivenBackIsTheNextTakenAndAFullPoolDropsTheRest() {
        PlanPool pool = new PlanPool(4, 1_000);
        BatchPlan first = pool.take();
        pool.give(first);
        assertEquals(1, pool.idle());
        assertSame(first, pool.take(), "the idle plan, not a new one");
        assertEquals(0, pool.idle());
        List<BatchPlan> many = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            many.add(pool.take()); // an empty pool makes new plans
        }
        assertEquals(6, distinct(many), "six new plans");
        many.forEach(pool::give);
        assertEquals(4, pool.idle(), "a full pool keeps four and drops the rest");
        Set<BatchPlan> taken = Collections.newSetFromMap(new IdentityHashMap<>());
        for (int i = 0; i < 4; i++) {
            taken.add(pool.take());
        }
        assertEquals(4, taken.size());
        assertTrue(many.containsAll(taken));
        assertThrows(IllegalArgumentException.class, () -> new PlanPool(6, 1_000));
    }

    @Test
    void noPlanIsHeldTwiceAtOnceUnderContention() throws Exception {
        PlanPool pool = new PlanPool(8, 1_000);
        int threads = 8;
        int rounds = 200_000;
        Map<BatchPlan, AtomicInteger> holders = new ConcurrentHashMap<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        List<Thread> all = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            all.add(Thread.ofPlatform().start(() -> {
                try {
                    for (int i = 0; i < rounds; i++) {
                        BatchPlan plan = pool.take();
                        AtomicInteger held = holders.computeIfAbsent(plan, p -> new AtomicInteger());
                        if (held.incrementAndGet() != 1) {
                            throw new AssertionError("a plan handed to two holders at once");
                        }
                        Thread.onSpinWait();
                        held.decrementAndGet();
                        pool.give(plan);
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        for (Thread t : all) {
            t.join();
        }
        assertTrue(failures.isEmpty(), "failed: " + (failures.isEmpty() ? "" : failures.getFirst()));
        assertTrue(pool.idle() <= 8 && pool.idle() >= 1, "idle " + pool.idle());
    }

    @Test
    void aPlanOfABatchAboveTheLargestIsDropped() {
        PlanPool pool = new PlanPool(4, 1_000);
        pool.give(planOf(1_001));
        assertEquals(0, pool.idle(), "a plan of 1,001 ids kept by a pool of batches up to 1,000");
        pool.give(planOf(1_000));
        assertEquals(1, pool.idle());
    }

    @Test
    void aLeaseGivesItsPlanBackOnceWhenThePushSucceededAndTheLastWriterLeft() {
        PlanPool pool = new PlanPool(4, 1_000);
        PushLease quiet = new PushLease(planOf(10), pool);
        quiet.end(true);
        assertEquals(1, pool.idle(), "no writer inside: back at the end");
        assertSame(quiet.plan, pool.take());

        PushLease busy = new PushLease(planOf(10), pool);
        assertTrue(busy.enter());
        assertTrue(busy.enter()); // a resend's writer beside the first
        busy.end(true);
        assertEquals(0, pool.idle(), "given back while two writers read it");
        assertFalse(busy.enter(), "a writer after the push ended was let in");
        busy.exit();
        assertEquals(0, pool.idle(), "given back while a writer reads it");
        busy.exit();
        assertEquals(1, pool.idle(), "the last writer out gives it back");
        assertEquals(0, busy.writers());
        pool.take();

        PushLease failed = new PushLease(planOf(10), pool);
        assertTrue(failed.enter());
        failed.end(false);
        failed.exit();
        assertEquals(0, pool.idle(), "a failed push's plan came back");
        PushLease failedQuiet = new PushLease(planOf(10), pool);
        failedQuiet.end(false);
        assertEquals(0, pool.idle(), "a failed push's plan came back");
    }

    @Test
    void writersRacingTheEndGiveThePlanBackExactlyOnce() throws Exception {
        for (int round = 0; round < 2_000; round++) {
            PlanPool pool = new PlanPool(4, 1_000);
            PushLease lease = new PushLease(planOf(10), pool);
            AtomicInteger refused = new AtomicInteger();
            List<Thread> writers = new ArrayList<>();
            for (int w = 0; w < 3; w++) {
                writers.add(Thread.ofPlatform().start(() -> {
                    for (int i = 0; i < 50; i++) {
                        if (lease.enter()) {
                            Thread.onSpinWait();
                            lease.exit();
                        } else {
                            refused.incrementAndGet();
                        }
                    }
                }));
            }
            lease.end(true);
            for (Thread t : writers) {
                t.join();
            }
            assertEquals(1, pool.idle(), "round " + round + ": plans given back");
            assertEquals(0, lease.writers());
            assertFalse(lease.enter());
        }
    }

    private static BatchPlan planOf(int ids) {
        long[] batch = new long[ids];
        for (int i = 0; i < ids; i++) {
            batch[i] = i;
        }
        return new BatchPlan().plan(batch, 0, ids, SlotTable.balanced(2));
    }

    private static int distinct(List<BatchPlan> plans) {
        Set<BatchPlan> set = Collections.newSetFromMap(new IdentityHashMap<>());
        set.addAll(plans);
        return set.size();
    }
}
