package dev.ferry.cluster;

import java.util.Arrays;
import java.util.Objects;

/**
 * Slot groups that move from one live server to another while both serve: the old owner streams
 * the groups' rows to the new one and forwards every push that arrives meanwhile, then the
 * controller flips the ownership in one write.
 *
 * @param id     unique per cluster (the controller's counter), names the move's status node
 * @param from   the member that owns the groups now
 * @param to     the member that will own them
 * @param groups the slot groups, ascending, distinct
 * @param copy   a rebuild of a backup rather than a move: the same snapshot and forwarding, but
 *               once it is ready {@code to} joins the groups' in-sync backups and {@code from}
 *               stays their primary
 */
public record Move(long id, String from, String to, int[] groups, boolean copy) {

    /** A move of ownership (not a copy). */
    public Move(long id, String from, String to, int[] groups) {
        this(id, from, to, groups, false);
    }

    /** Checks the values. */
    public Move {
        Objects.requireNonNull(from, "from");
        Objects.requireNonNull(to, "to");
        groups = groups.clone();
        if (from.equals(to) || groups.length == 0) {
            throw new IllegalArgumentException("a move needs two members and at least one group: " + from + " -> "
                    + to + ", " + groups.length + " groups");
        }
        for (int i = 1; i < groups.length; i++) {
            if (groups[i] <= groups[i - 1]) {
                throw new IllegalArgumentException("move groups must be ascending and distinct");
            }
        }
    }

    /** The groups (a copy). */
    @Override
    public int[] groups() {
        return groups.clone();
    }

    /** Whether {@code group} is in this move. */
    public boolean contains(int group) {
        return Arrays.binarySearch(groups, group) >= 0;
    }

    /** The number of groups. */
    public int size() {
        return groups.length;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Move m && m.id == id && m.from.equals(from) && m.to.equals(to)
                && Arrays.equals(m.groups, groups) && m.copy == copy;
    }

    @Override
    public int hashCode() {
        return Objects.hash(id, from, to, Arrays.hashCode(groups));
    }

    @Override
    public String toString() {
        return (copy ? "Copy[" : "Move[") + id + ": " + groups.length + " groups " + from + " -> " + to + "]";
    }
}
