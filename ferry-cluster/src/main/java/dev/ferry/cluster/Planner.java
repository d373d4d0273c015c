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
     * Plans from {@code current} without replication (one copy per group).
     *
     * @param live             live member id to the address clients reach it at
     * @param draining         members asked to leave cleanly (ignored if not live)
     * @param maxGroupsPerMove the largest move; bigger transfers are split
     * @param epoch            the controller epoch written into a changed assignment
     */
    public static Plan plan(Assignment current, Map<String, String> live, Set<String> draining,
            int maxGroupsPerMove, long epoch) {
        return plan(current, live, draining, maxGroupsPerMove, epoch, 1, Map.of());
    }

    /**
     * Plans from {@code current} with {@code replicas} copies per group.
     *
     * <ul>
     *   <li>Backups reported out of sync ({@code outOfSync}: member to group to the epoch the
     *       primary reported at; stale reports are ignored) and backups that are not live leave
     *       the groups' in-sync sets.</li>
     *   <li>A group whose primary is not live gets its first in-sync backup as primary (epoch + 1);
     *       only with none left does it go to the least loaded member, restored from the dead
     *       owner's checkpoint (epoch + 1).</li>
     *   <li>Moves of ownership never go to one of the group's backups, and the old primary leaves
     *       the group (its rows may hold pushes the new primary refused).</li>
     *   <li>Once the primaries are spread evenly, groups with fewer than {@code replicas} copies
     *       get a copy ({@link Move#copy()}) to the eligible member holding the fewest backups.</li>
     * </ul>
     */
    public static Plan plan(Assignment current, Map<String, String> live, Set<String> draining,
            int maxGroupsPerMove, long epoch, int replicas, Map<String, Map<Integer, Long>> outOfSync) {
        Objects.requireNonNull(current, "current");
        if (maxGroupsPerMove < 1 || replicas < 1) {
            throw new IllegalArgumentException("maxGroupsPerMove and replicas must be >= 1: " + maxGroupsPerMove
                    + ", " + replicas);
        }
        if (live.isEmpty()) {
            return new Plan(current, List.of());
        }
        List<String> eligible = live.keySet().stream().filter(m -> !draining.contains(m)).sorted().toList();
        if (eligible.isEmpty()) {
            eligible = live.keySet().stream().sorted().toList();
        }
        String[] owners = current.owners().toArray(String[]::new);
        long[] epochs = new long[RoutingTable.GROUPS];
        List<List<String>> backups = new ArrayList<>(RoutingTable.GROUPS);
        for (int g = 0; g < RoutingTable.GROUPS; g++) {
            epochs[g] = current.epoch(g);
            List<String> b = new ArrayList<>(current.backupsOf(g));
            b.removeIf(m -> !live.containsKey(m) || draining.contains(m));
            for (Map.Entry<String, Map<Integer, Long>> report : outOfSync.entrySet()) {
                Long at = report.getValue().get(g);
                if (at != null && at == epochs[g]) {
                    b.remove(report.getKey());
                }
            }
            backups.add(b);
        }
        Map<String, Integer> counts = new TreeMap<>();
        live.keySet().forEach(m -> counts.put(m, 0));
        for (String o : owners) {
            if (o != null && live.containsKey(o)) {
                counts.merge(o, 1, Integer::sum);
            }
        }
        // Failover: an in-sync backup if there is one; else the least loaded member (lowest id on
        // ties), which restores the rows from the dead owner's last checkpoint.
        Map<Integer, String> restore = new TreeMap<>(current.restoreFrom());
        for (int g = 0; g < owners.length; g++) {
            if (owners[g] == null || !live.containsKey(owners[g])) {
                String to;
                if (!backups.get(g).isEmpty()) {
                    to = backups.get(g).remove(0);
                    restore.remove(g);
                } else {
                    if (owners[g] != null) {
                        restore.put(g, owners[g]);
                    }
                    to = eligible.stream().min(Comparator.comparingInt((String m) -> counts.get(m))
                            .thenComparing(Comparator.naturalOrder())).orElseThrow();
                }
                if (owners[g] != null) {
                    epochs[g]++;
                }
                owners[g] = to;
                counts.merge(to, 1, Integer::sum);
            }
        }
        Move move = current.move();
        if (move != null && (!live.containsKey(move.from()) || !live.containsKey(move.to())
                || !allOwnedBy(owners, move) || !targetsFree(backups, move))) {
            move = null;
        }
        Map<String, String> addresses = new TreeMap<>(live);
        List<Long> epochList = new ArrayList<>(RoutingTable.GROUPS);
        for (long e : epochs) {
            epochList.add(e);
        }
        boolean changed = !Arrays.asList(owners).equals(current.owners()) || !addresses.equals(current.addresses())
                || !Objects.equals(move, current.move()) || !restore.equals(current.restoreFrom())
                || !backups.equals(current.backups()) || !epochList.equals(current.epochs());
        Assignment next = changed
                ? current.next(epoch, current.nextMoveId(), owners, addresses, move, restore, backups, epochs)
                : current;
        if (move != null) {
            return new Plan(next, List.of());
        }
        List<Move> moves = balance(owners, backups, counts, eligible, maxGroupsPerMove, next.nextMoveId());
        if (!moves.isEmpty() && targetsBackUpAll(backups, moves.get(0))) {
            return new Plan(transfer(next, moves.get(0), epoch), List.of());
        }
        if (moves.isEmpty() && replicas > 1) {
            moves = copies(owners, backups, eligible, replicas, maxGroupsPerMove, next.nextMoveId());
        }
        return new Plan(next, moves);
    }

    private static boolean targetsBackUpAll(List<List<String>> backups, Move move) {
        for (int g : move.groups()) {
            if (!backups.get(g).contains(move.to())) {
                return false;
            }
        }
        return true;
    }

    /**
     * {@code a} with the groups of {@code move}, all backed up by its target, handed to that
     * backup in one write (epoch + 1), without copying anything; the old primary leaves them (its
     * rows may hold a push the new primary fenced out) and a copy rebuilds the missing backup.
     */
    static Assignment transfer(Assignment a, Move move, long epoch) {
        String[] owners = a.owners().toArray(String[]::new);
        List<List<String>> backups = new ArrayList<>(a.backups());
        long[] epochs = epochs(a);
        Map<Integer, String> restore = new TreeMap<>(a.restoreFrom());
        for (int g : move.groups()) {
            List<String> b = new ArrayList<>(backups.get(g));
            b.remove(move.to());
            backups.set(g, b);
            owners[g] = move.to();
            epochs[g]++;
            restore.remove(g);
        }
        return a.next(epoch, a.nextMoveId(), owners, a.addresses(), a.move(), restore, backups, epochs);
    }

    /** Whether a move's target holds no copy of its groups yet (a copy's, nor a move's). */
    private static boolean targetsFree(List<List<String>> backups, Move move) {
        for (int g : move.groups()) {
            if (backups.get(g).contains(move.to())) {
                return false;
            }
        }
        return true;
    }

    /** Copies for the groups short of {@code replicas} copies: the first (primary, target) pair's groups. */
    private static List<Move> copies(String[] owners, List<List<String>> backups, List<String> eligible, int replicas,
            int maxGroupsPerMove, long id) {
        Map<String, Integer> load = new TreeMap<>();
        eligible.forEach(m -> load.put(m, 0));
        for (List<String> b : backups) {
            for (String m : b) {
                load.computeIfPresent(m, (k, v) -> v + 1);
            }
        }
        String from = null;
        String to = null;
        List<Integer> groups = new ArrayList<>();
        for (int g = 0; g < owners.length && groups.size() < maxGroupsPerMove; g++) {
            if (owners[g] == null || 1 + backups.get(g).size() >= replicas) {
                continue;
            }
            int group = g;
            if (from == null) {
                String target = eligible.stream().filter(m -> !m.equals(owners[group]) && !backups.get(group).contains(m))
                        .min(Comparator.comparingInt((String m) -> load.get(m)).thenComparing(Comparator.naturalOrder()))
                        .orElse(null);
                if (target == null) {
                    continue; // fewer members than copies
                }
                from = owners[g];
                to = target;
            }
            if (from.equals(owners[g]) && !backups.get(g).contains(to)) {
                groups.add(g);
            }
        }
        if (from == null) {
            return List.of();
        }
        return List.of(new Move(id, from, to, groups.stream().mapToInt(Integer::intValue).toArray(), true));
    }

    private static boolean allOwnedBy(String[] owners, Move move) {
        for (int g : move.groups()) {
            if (!move.from().equals(owners[g])) {
                return false;
            }
        }
        return true;
    }

    private static List<Move> balance(String[] owners, List<List<String>> backups, Map<String, Integer> counts,
            List<String> eligible, int maxGroupsPerMove, long firstId) {
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
        List<String> receivers = new ArrayList<>();
        Map<String, Integer> deficit = new TreeMap<>();
        for (String m : counts.keySet()) {
            int d = quota.get(m) - counts.get(m);
            if (d > 0) {
                receivers.add(m);
                deficit.put(m, d);
            }
        }
        // Each giver's surplus (its highest-numbered groups first) to the receivers in order; a group
        // never goes to one of its backups (a move resets the target's rows of the groups).
        List<Move> moves = new ArrayList<>();
        long id = firstId;
        boolean[] taken = new boolean[owners.length];
        for (String giver : counts.keySet()) {
            int surplus = counts.get(giver) - quota.get(giver);
            for (String receiver : receivers) {
                while (surplus > 0 && deficit.get(receiver) > 0) {
                    int n = Math.min(Math.min(deficit.get(receiver), surplus), maxGroupsPerMove);
                    // Groups the receiver backs up first (handed over without a copy), then the others.
                    List<Integer> given = pick(owners, backups, taken, giver, receiver, n, true);
                    if (given.isEmpty()) {
                        given = pick(owners, backups, taken, giver, receiver, n, false);
                    }
                    if (given.isEmpty()) {
                        break;
                    }
                    given.forEach(g -> taken[g] = true);
                    moves.add(new Move(id++, giver, receiver, given.stream().mapToInt(Integer::intValue).sorted()
                            .toArray()));
                    surplus -= given.size();
                    deficit.merge(receiver, -given.size(), Integer::sum);
                }
            }
        }
        return moves;
    }

    private static List<Integer> pick(String[] owners, List<List<String>> backups, boolean[] taken, String giver,
            String receiver, int n, boolean backedUp) {
        List<Integer> given = new ArrayList<>();
        for (int g = owners.length - 1; g >= 0 && given.size() < n; g--) {
            if (!taken[g] && giver.equals(owners[g]) && backups.get(g).contains(receiver) == backedUp) {
                given.add(g);
            }
        }
        return given;
    }

    /**
     * {@code assignment} with its finished move applied, one generation later: a move's groups
     * flip to its target (epoch + 1; the old primary leaves them), a copy's target joins the
     * groups' in-sync backups.
     */
    public static Assignment flip(Assignment assignment, long epoch) {
        Move move = Objects.requireNonNull(assignment.move(), "no move in flight");
        String[] owners = assignment.owners().toArray(String[]::new);
        Map<Integer, String> restore = new TreeMap<>(assignment.restoreFrom());
        List<List<String>> backups = new ArrayList<>(assignment.backups());
        long[] epochs = epochs(assignment);
        for (int g : move.groups()) {
            if (move.copy()) {
                List<String> b = new ArrayList<>(backups.get(g));
                if (!b.contains(move.to()) && !move.to().equals(owners[g])) {
                    b.add(move.to());
                }
                backups.set(g, b);
            } else {
                owners[g] = move.to();
                epochs[g]++;
                restore.remove(g); // the rows came with the move
            }
        }
        return assignment.next(epoch, assignment.nextMoveId(), owners, assignment.addresses(), null, restore, backups,
                epochs);
    }

    /** {@code assignment} with {@code move} started, one generation later. */
    public static Assignment start(Assignment assignment, Move move, long epoch) {
        if (assignment.move() != null) {
            throw new IllegalStateException("a move is in flight: " + assignment.move());
        }
        return assignment.next(epoch, Math.max(assignment.nextMoveId(), move.id() + 1),
                assignment.owners().toArray(String[]::new), assignment.addresses(), move, assignment.restoreFrom(),
                assignment.backups(), epochs(assignment));
    }

    /** {@code assignment} with its move dropped (failed), one generation later. */
    public static Assignment cancel(Assignment assignment, long epoch) {
        return assignment.next(epoch, assignment.nextMoveId(), assignment.owners().toArray(String[]::new),
                assignment.addresses(), null, assignment.restoreFrom(), assignment.backups(), epochs(assignment));
    }

    private static long[] epochs(Assignment a) {
        long[] e = new long[RoutingTable.GROUPS];
        for (int g = 0; g < e.length; g++) {
            e[g] = a.epoch(g);
        }
        return e;
    }
}
