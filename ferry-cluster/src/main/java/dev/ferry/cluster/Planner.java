package dev.ferry.cluster;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;

import dev.ferry.ps.net.RoutingTable;

/**
 * The controller's decisions as a pure function: (assignment, live members, draining members)
 * to (next assignment, moves). No ZooKeeper and no clock, so that it is property-tested alone.
 *
 * <ul>
 *   <li><b>Failover.</b> Groups whose owner is not live (its member node expired) go at once to
 *       the eligible members with the fewest groups; they restart from the last checkpoint, so
 *       there is nothing to move. A move whose source or target is gone is cancelled.</li>
 *   <li><b>Even spread.</b> Each eligible member (live and not draining) has a quota of
 *       {@code groups / n} or one more; the extra ones go to the members that already own the
 *       most, so that as few groups as possible move. Draining members have a quota of 0.</li>
 *   <li><b>Minimal movement.</b> Only a member's surplus over its quota moves (its
 *       highest-numbered groups), straight to a member below its quota: the number of groups
 *       moved is exactly the total surplus, the least any move set reaching an even spread can
 *       have.</li>
 *   <li><b>Never unowned.</b> While any member is live, every group has a live owner.</li>
 * </ul>
 * Moves are proposed only when none is in flight; the controller starts the first, waits for it
 * to finish, and plans again.
 */
public final class Planner {

    private Planner() {
    }

    /**
     * What the controller should write next, and the moves it should then run.
     *
     * @param next  the assignment with failover applied (the same object if nothing changed)
     * @param moves the moves that reach an even spread from {@code next}, in order; empty while a
     *              move is in flight
     */
    public record Plan(Assignment next, List<Move> moves) {
    }

    /**
     * Plans from {@code current}.
     *
     * @param live             live member id to the address clients reach it at
     * @param draining         members asked to leave cleanly (ignored if not live)
     * @param maxGroupsPerMove the largest move; bigger transfers are split
     * @param epoch            the controller epoch written into a changed assignment
     */
    public static Plan plan(Assignment current, Map<String, String> live, Set<String> draining,
            int maxGroupsPerMove, long epoch) {
        Objects.requireNonNull(current, "current");
        if (maxGroupsPerMove < 1) {
            throw new IllegalArgumentException("maxGroupsPerMove must be >= 1: " + maxGroupsPerMove);
        }
        if (live.isEmpty()) {
            return new Plan(current, List.of());
        }
        List<String> eligible = live.keySet().stream().filter(m -> !draining.contains(m)).sorted().toList();
        if (eligible.isEmpty()) {
            eligible = live.keySet().stream().sorted().toList();
        }
        String[] owners = current.owners().toArray(String[]::new);
        Map<String, Integer> counts = new TreeMap<>();
        live.keySet().forEach(m -> counts.put(m, 0));
        for (String o : owners) {
            if (o != null && live.containsKey(o)) {
                counts.merge(o, 1, Integer::sum);
            }
        }
        // Failover: orphans to the eligible member with the fewest groups (lowest id on ties); the
        // new owner restores them from the dead owner's last checkpoint.
        Map<Integer, String> restore = new TreeMap<>(current.restoreFrom());
        for (int g = 0; g < owners.length; g++) {
            if (owners[g] == null || !live.containsKey(owners[g])) {
                if (owners[g] != null) {
                    restore.put(g, owners[g]);
                }
                String to = eligible.stream().min(Comparator.comparingInt((String m) -> counts.get(m))
                        .thenComparing(Comparator.naturalOrder())).orElseThrow();
                owners[g] = to;
                counts.merge(to, 1, Integer::sum);
            }
        }
        Move move = current.move();
        if (move != null && (!live.containsKey(move.from()) || !live.containsKey(move.to())
                || !allOwnedBy(owners, move))) {
            move = null;
        }
        Map<String, String> addresses = new TreeMap<>(live);
        boolean changed = !Arrays.asList(owners).equals(current.owners()) || !addresses.equals(current.addresses())
                || !Objects.equals(move, current.move()) || !restore.equals(current.restoreFrom());
        Assignment next = changed
                ? new Assignment(current.generation() + 1, epoch, current.nextMoveId(), Arrays.asList(owners),
                        addresses, move, restore)
                : current;
        if (move != null) {
            return new Plan(next, List.of());
        }
        return new Plan(next, balance(owners, counts, eligible, maxGroupsPerMove, next.nextMoveId()));
    }

    private static boolean allOwnedBy(String[] owners, Move move) {
        for (int g : move.groups()) {
            if (!move.from().equals(owners[g])) {
                return false;
            }
        }
        return true;
    }

    private static List<Move> balance(String[] owners, Map<String, Integer> counts, List<String> eligible,
            int maxGroupsPerMove, long firstId) {
        // Quotas: the remainder goes to the eligible members that own the most already.
        Map<String, Integer> quota = new TreeMap<>();
        counts.keySet().forEach(m -> quota.put(m, 0));
        int base = RoutingTable.GROUPS / eligible.size();
        int extra = RoutingTable.GROUPS % eligible.size();
        List<String> byCount = new ArrayList<>(eligible);
        byCount.sort(Comparator.comparingInt((String m) -> -counts.get(m)).thenComparing(Comparator.naturalOrder()));
        for (int i = 0; i < byCount.size(); i++) {
            quota.put(byCount.get(i), base + (i < extra ? 1 : 0));
        }
        // Surplus groups of each giver (its highest-numbered first), and the receivers' deficits.
        List<String> receivers = new ArrayList<>();
        Map<String, Integer> deficit = new TreeMap<>();
        for (String m : counts.keySet()) {
            int d = quota.get(m) - counts.get(m);
            if (d > 0) {
                receivers.add(m);
                deficit.put(m, d);
            }
        }
        List<Move> moves = new ArrayList<>();
        long id = firstId;
        int r = 0;
        for (String giver : counts.keySet()) {
            int surplus = counts.get(giver) - quota.get(giver);
            if (surplus <= 0) {
                continue;
            }
            List<Integer> given = new ArrayList<>();
            for (int g = owners.length - 1; g >= 0 && given.size() < surplus; g--) {
                if (giver.equals(owners[g])) {
                    given.add(g);
                }
            }
            int at = 0;
            while (at < given.size()) {
                String receiver = receivers.get(r);
                int n = Math.min(Math.min(deficit.get(receiver), given.size() - at), maxGroupsPerMove);
                int[] groups = given.subList(at, at + n).stream().mapToInt(Integer::intValue).sorted().toArray();
                moves.add(new Move(id++, giver, receiver, groups));
                at += n;
                deficit.merge(receiver, -n, Integer::sum);
                if (deficit.get(receiver) == 0) {
                    r++;
                }
            }
        }
        return moves;
    }

    /** {@code assignment} with a finished move's groups flipped to its target, one generation later. */
    public static Assignment flip(Assignment assignment, long epoch) {
        Move move = Objects.requireNonNull(assignment.move(), "no move in flight");
        String[] owners = assignment.owners().toArray(String[]::new);
        Map<Integer, String> restore = new TreeMap<>(assignment.restoreFrom());
        for (int g : move.groups()) {
            owners[g] = move.to();
            restore.remove(g); // the rows came with the move
        }
        return new Assignment(assignment.generation() + 1, epoch, assignment.nextMoveId(), Arrays.asList(owners),
                assignment.addresses(), null, restore);
    }

    /** {@code assignment} with {@code move} started, one generation later. */
    public static Assignment start(Assignment assignment, Move move, long epoch) {
        if (assignment.move() != null) {
            throw new IllegalStateException("a move is in flight: " + assignment.move());
        }
        return new Assignment(assignment.generation() + 1, epoch, Math.max(assignment.nextMoveId(), move.id() + 1),
                assignment.owners(), assignment.addresses(), move, assignment.restoreFrom());
    }

    /** {@code assignment} with its move dropped (failed), one generation later. */
    public static Assignment cancel(Assignment assignment, long epoch) {
        return new Assignment(assignment.generation() + 1, epoch, assignment.nextMoveId(), assignment.owners(),
                assignment.addresses(), null, assignment.restoreFrom());
    }
}
