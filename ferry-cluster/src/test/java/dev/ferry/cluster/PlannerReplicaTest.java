package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.net.Replicas;
import dev.ferry.ps.net.RoutingTable;

/** The planner with replicas: placement, promotion of an in-sync backup, in-sync shrink, copies. */
class PlannerReplicaTest {

    private static Map<String, String> live(String... ids) {
        Map<String, String> m = new TreeMap<>();
        for (String id : ids) {
            m.put(id, "addr-" + id);
        }
        return m;
    }

    /** Plans, starts and finishes moves (copies included) until nothing changes. */
    private static Assignment settle(Assignment a, Map<String, String> live, int replicas) {
        for (int pass = 0; pass < 200; pass++) {
            Planner.Plan plan = Planner.plan(a, live, Set.of(), 1024, 1, replicas, Map.of());
            Assignment next = plan.next();
            if (!plan.moves().isEmpty()) {
                next = Planner.flip(Planner.start(next, plan.moves().get(0), 1), 1);
            }
            if (next == a) {
                return a;
            }
            assertEquals(a.generation() + (next.generation() - a.generation()), next.generation());
            a = Assignment.decode(next.encode()); // every written table survives its bytes
        }
        throw new AssertionError("the planner did not settle");
    }

    private static void assertReplicated(Assignment a, List<String> members, int replicas) {
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            String owner = a.owner(g);
            assertTrue(members.contains(owner), "group " + g + " owned by " + owner);
            assertEquals(replicas - 1, a.backupsOf(g).size(), "backups of group " + g);
            assertFalse(a.backupsOf(g).contains(owner));
            assertTrue(members.containsAll(a.backupsOf(g)));
        }
        int lo = RoutingTable.GROUPS / members.size();
        for (String m : members) {
            int n = a.groupCount(m);
            assertTrue(n >= lo && n <= lo + 1, m + " owns " + n);
        }
    }

    @Test
    void threeMembersGetOnePrimaryAndOneBackupPerGroup() {
        Assignment a = settle(Assignment.empty(), live("a", "b", "c"), 2);
        assertReplicated(a, List.of("a", "b", "c"), 2);
        Replicas r = a.replicas(1);
        RoutingTable t = a.routingTable();
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            assertTrue(r.isBackup(g, t.indexOf(a.backupsOf(g).get(0))));
            assertFalse(r.isBackup(g, t.ownerOfGroup(g)));
        }
    }

    @Test
    void aDeadPrimaryIsReplacedByItsInSyncBackupInOneWrite() {
        Assignment before = settle(Assignment.empty(), live("a", "b", "c"), 2);
        Planner.Plan plan = Planner.plan(before, live("a", "c"), Set.of(), 1024, 1, 2, Map.of());
        Assignment after = plan.next();
        assertEquals(before.generation() + 1, after.generation());
        assertTrue(after.restoreFrom().isEmpty(), "nothing restored from a checkpoint");
        int promoted = 0;
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            if ("b".equals(before.owner(g))) {
                promoted++;
                assertEquals(before.backupsOf(g).get(0), after.owner(g), "group " + g + " promoted its backup");
                assertEquals(before.epoch(g) + 1, after.epoch(g), "epoch of group " + g);
                assertTrue(after.backupsOf(g).isEmpty());
            } else {
                assertEquals(before.owner(g), after.owner(g));
                assertEquals(before.epoch(g), after.epoch(g));
                assertFalse(after.backupsOf(g).contains("b"));
            }
        }
        assertTrue(promoted > 300);
        // Then copies bring every group back to two copies on the two members left.
        Assignment healed = settle(after, live("a", "c"), 2);
        assertReplicated(healed, List.of("a", "c"), 2);
        // And when b comes back, it takes primaries (never of groups it backs up) and copies.
        Assignment back = settle(healed, live("a", "b", "c"), 2);
        assertReplicated(back, List.of("a", "b", "c"), 2);
    }

    @Test
    void aBackupReportedOutOfSyncLeavesOnlyAtTheReportedEpoch() {
        Assignment a = settle(Assignment.empty(), live("a", "b", "c"), 2);
        int g = 5;
        String backup = a.backupsOf(g).get(0);
        Planner.Plan stale = Planner.plan(a, live("a", "b", "c"), Set.of(), 1024, 1, 2,
                Map.of(backup, Map.of(g, a.epoch(g) - 1)));
        assertEquals(a, stale.next(), "a report of an older epoch changes nothing");
        Planner.Plan plan = Planner.plan(a, live("a", "b", "c"), Set.of(), 1024, 1, 2,
                Map.of(backup, Map.of(g, a.epoch(g))));
        assertTrue(plan.next().backupsOf(g).isEmpty());
        assertEquals(a.owner(g), plan.next().owner(g));
        assertEquals(a.epoch(g), plan.next().epoch(g));
        // The next pass copies the group again, to the member that is neither its primary nor lost.
        assertEquals(1, plan.moves().size());
        Move copy = plan.moves().get(0);
        assertTrue(copy.copy());
        assertTrue(copy.contains(g));
        assertEquals(a.owner(g), copy.from());
        assertNotEquals(a.owner(g), copy.to());
    }

    @Test
    void withOneReplicaNothingIsCopied() {
        Assignment a = settle(Assignment.empty(), live("a", "b", "c"), 1);
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            assertTrue(a.backupsOf(g).isEmpty());
        }
        Planner.Plan plan = Planner.plan(a, live("a", "c"), Set.of(), 1024, 1, 1, Map.of());
        assertFalse(plan.next().restoreFrom().isEmpty(), "without a backup the dead owner's checkpoint is used");
    }
}
