package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.junit.jupiter.api.Test;

/**
 * {@link PlanPool}: a plan is never handed to two holders at once, a full pool drops what it is
 * given, an empty one makes new plans, and plans given back are the ones taken next.
 */
class PlanPoolTest {

    @Test
    void aPlanGivenBackIsTheNextTakenAndAFullPoolDropsTheRest() {
        PlanPool pool = new PlanPool(4);
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
        assertThrows(IllegalArgumentException.class, () -> new PlanPool(6));
    }

    @Test
    void noPlanIsHeldTwiceAtOnceUnderContention() throws Exception {
        PlanPool pool = new PlanPool(8);
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

    private static int distinct(List<BatchPlan> plans) {
        Set<BatchPlan> set = Collections.newSetFromMap(new IdentityHashMap<>());
        set.addAll(plans);
        return set.size();
    }
}
