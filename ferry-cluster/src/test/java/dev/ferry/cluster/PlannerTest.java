package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.net.RoutingTable;

/**
 * The controller's pure decisions, over seeded random histories of joins, clean leaves and
 * crashes: never an unowned group, an even spread once the moves ran, and exactly the surplus
 * moved (no group moved twice or moved to a member that then gives it away).
 */
class PlannerTest {

    private static final int G = RoutingTable.GROUPS;

    @Test
    void firstMemberTakesEveryGroupWithoutMoves() {
        Planner.Plan plan = Planner.plan(Assignment.empty(), Map.of("a", "addr-a"), Set.of(), 64, 1);
        for (int g = 0; g < G; g++) {
            assertEquals("a", plan.next().owner(g));
        }
        assertEquals(1, plan.next().generation());
        assertTrue(plan.moves().isEmpty());
    }

    @Test
    void nothingChangesWhenBalanced() {
        Assignment a = settle(Assignment.empty(), live("a", "b", "c"), Set.of());
        Planner.Plan plan = Planner.plan(a, live("a", "b", "c"), Set.of(), 64, 1);
        assertSame(a, plan.next());
        assertTrue(plan.moves().isEmpty());
    }

    @Test
    void joinMovesExactlyTheNewQuota() {
        Assignment three = settle(Assignment.empty(), live("a", "b", "c"), Set.of());
        Planner.Plan plan = Planner.plan(three, live("a", "b", "c", "d"), Set.of(), 1024, 1);
        int moved = plan.moves().stream().mapToInt(Move::size).sum();
        assertEquals(G / 4, moved);
        plan.moves().forEach(m -> assertEquals("d", m.to()));
    }

    @Test
    void cleanLeaveMovesOnlyTheLeaversGroups() {
        Assignment four = settle(Assignment.empty(), live("a", "b", "c", "d"), Set.of());
        Planner.Plan plan = Planner.plan(four, live("a", "b", "c", "d"), Set.of("b"), 1024, 1);
        assertEquals(four.groupCount("b"), plan.moves().stream().mapToInt(Move::size).sum());
        plan.moves().forEach(m -> assertEquals("b", m.from()));
    }

    @Test
    void crashReassignsAtOnceWithoutMoves() {
        Assignment three = settle(Assignment.empty(), live("a", "b", "c"), Set.of());
        Planner.Plan plan = Planner.plan(three, live("a", "c"), Set.of(), 64, 2);
        for (int g = 0; g < G; g++) {
            assertTrue(Set.of("a", "c").contains(plan.next().owner(g)), "group " + g);
        }
        assertEquals(2, plan.next().controllerEpoch());
        assertEquals(three.generation() + 1, plan.next().generation());
        int a = plan.next().groupCount("a");
        assertTrue(Math.abs(a - (G - a)) <= 1, "orphans spread evenly: " + a);
        // Their new owners restore them from b's last checkpoint; a later move of one ends that.
        assertEquals(three.groupCount("b"), plan.next().restoreFrom().size());
        for (int g = 0; g < G; g++) {
            assertEquals("b".equals(three.owner(g)) ? "b" : null, plan.next().restoreFrom().get(g), "group " + g);
        }
        int orphan = plan.next().restoreFrom().keySet().iterator().next();
        String owner = plan.next().owner(orphan);
        Move back = new Move(99, owner, owner.equals("a") ? "c" : "a", new int[] {orphan});
        Assignment moved = Planner.flip(Planner.start(plan.next(), back, 2), 2);
        assertNull(moved.restoreFrom().get(orphan));
        assertEquals(three.groupCount("b") - 1, moved.restoreFrom().size());
        assertEquals(moved, Assignment.decode(moved.encode()));
    }

    @Test
    void moveToACrashedMemberIsCancelled() {
        Assignment three = settle(Assignment.empty(), live("a", "b", "c"), Set.of());
        Planner.Plan plan = Planner.plan(three, live("a", "b", "c", "d"), Set.of(), 64, 1);
        Assignment moving = Planner.start(plan.next(), plan.moves().get(0), 1);
        Planner.Plan after = Planner.plan(moving, live("a", "b", "c"), Set.of(), 64, 1);
        assertNull(after.next().move());
        assertEquals(moving.generation() + 1, after.next().generation());
        assertTrue(after.moves().isEmpty(), "already balanced among a, b, c");
    }

    @Test
    void encodesAndDecodes() {
        Assignment three = settle(Assignment.empty(), live("a", "b", "c"), Set.of());
        Planner.Plan plan = Planner.plan(three, live("a", "b", "c", "d"), Set.of(), 64, 7);
        Assignment moving = Planner.start(plan.next(), plan.moves().get(0), 7);
        Assignment back = Assignment.decode(moving.encode());
        assertEquals(moving, back);
        assertNotNull(back.move());
        RoutingTable table = back.routingTable();
        assertEquals(moving.generation(), table.generation());
        assertEquals(List.of("a", "b", "c", "d"), table.members());
        for (int g = 0; g < G; g++) {
            assertEquals(moving.owner(g), table.members().get(table.ownerOfGroup(g)));
        }
    }

    @Test
    void randomHistoriesKeepTheProperties() {
        Random random = new Random(18);
        for (int run = 0; run < 200; run++) {
            Assignment a = Assignment.empty();
            Set<String> members = new HashSet<>();
            Set<String> draining = new HashSet<>();
            int nextId = 0;
            for (int step = 0; step < 12; step++) {
                int op = random.nextInt(4);
                if (op <= 1 || members.size() < 2) {
                    members.add("m" + nextId++);
                } else if (op == 2) {
                    String victim = pick(members, random);
                    members.remove(victim);
                    draining.remove(victim);
                } else {
                    draining.add(pick(members, random));
                }
                Map<String, String> live = live(members.toArray(String[]::new));
                a = checkedSettle(a, live, draining, 1 + random.nextInt(300), "run " + run + " step " + step);
                // A drained member that owns nothing leaves.
                for (String d : new ArrayList<>(draining)) {
                    if (a.groupCount(d) == 0 && members.size() > draining.size()) {
                        members.remove(d);
                        draining.remove(d);
                    }
                }
            }
        }
    }

    /** Runs the plan and its moves to the end, checking each property on the way. */
    private static Assignment checkedSettle(Assignment a, Map<String, String> live, Set<String> draining,
            int maxPerMove, String where) {
        Planner.Plan plan = Planner.plan(a, live, draining, maxPerMove, 1);
        Assignment next = plan.next();
        assertOwned(next, live, where);
        // Minimal movement: exactly the surplus moves, each group once, only to members below quota.
        Set<Integer> moved = new HashSet<>();
        Map<String, Integer> received = new TreeMap<>();
        for (Move m : plan.moves()) {
            assertTrue(m.size() <= maxPerMove, where);
            for (int g : m.groups()) {
                assertTrue(moved.add(g), where + ": group " + g + " moved twice");
                assertEquals(m.from(), next.owner(g), where);
            }
            received.merge(m.to(), m.size(), Integer::sum);
        }
        for (Move m : plan.moves()) {
            assertTrue(!received.containsKey(m.from()), where + ": " + m.from() + " both gives and receives");
        }
        for (Move m : plan.moves()) {
            next = Planner.flip(Planner.start(next, m, 1), 1);
            assertOwned(next, live, where);
        }
        // Even spread over the eligible members; nothing on a drained one (unless all drain).
        List<String> eligible = live.keySet().stream().filter(m -> !draining.contains(m)).toList();
        if (!eligible.isEmpty()) {
            int lo = G / eligible.size();
            for (String m : eligible) {
                int n = next.groupCount(m);
                assertTrue(n == lo || n == lo + 1, where + ": " + m + " owns " + n + ", quota " + lo);
            }
            for (String d : draining) {
                if (live.containsKey(d)) {
                    assertEquals(0, next.groupCount(d), where + ": drained " + d);
                }
            }
        }
        Planner.Plan again = Planner.plan(next, live, draining, maxPerMove, 1);
        assertSame(next, again.next(), where + ": a settled plan is a fixed point");
        assertTrue(again.moves().isEmpty(), where);
        return next;
    }

    private static void assertOwned(Assignment a, Map<String, String> live, String where) {
        for (int g = 0; g < G; g++) {
            assertTrue(live.containsKey(a.owner(g)), where + ": group " + g + " owned by " + a.owner(g));
        }
    }

    private static Assignment settle(Assignment a, Map<String, String> live, Set<String> draining) {
        return checkedSettle(a, live, draining, 1024, "settle");
    }

    private static Map<String, String> live(String... ids) {
        Map<String, String> live = new TreeMap<>();
        for (String id : ids) {
            live.put(id, "addr-" + id);
        }
        return live;
    }

    private static String pick(Set<String> set, Random random) {
        List<String> list = new ArrayList<>(set);
        list.sort(null);
        return list.get(random.nextInt(list.size()));
    }
}
