package dev.ferry.ps.net;

import java.util.Objects;

import dev.ferry.ps.PsException;

/**
 * The replicas of every slot group at one routing generation: per group its epoch and its
 * in-sync backups (server indices of the {@link RoutingTable} of the same generation; the
 * primary is the table's owner), and the fewest in-sync copies a push needs. Immutable.
 *
 * <p>The epoch of a group is bumped whenever its primary changes (a failover promotion or a
 * move's flip), in the same write as the generation. A backup applies replicated rows only from
 * the primary of the epoch it knows, which fences a deposed primary out: its pushes are refused
 * there and never acknowledged. The backups listed are exactly the in-sync set: a copy that
 * stopped answering is removed from it before a push is acknowledged without it.
 */
public final class Replicas {

    private static final int[] NONE = new int[0];

    private final long generation;
    private final long[] epochs;
    private final int[][] backups;
    private final int minInSync;

    private Replicas(long generation, long[] epochs, int[][] backups, int minInSync) {
        this.generation = generation;
        this.epochs = epochs;
        this.backups = backups;
        this.minInSync = minInSync;
    }

    /**
     * Replicas at {@code generation}.
     *
     * @param epochs    per group its epoch ({@link RoutingTable#GROUPS} entries)
     * @param backups   per group the server indices of its in-sync backups (null for none)
     * @param minInSync the fewest copies (primary included) a push is acknowledged with, &gt;= 1
     * @throws PsException {@code INVALID_ARGUMENT} for wrong sizes
     */
    public static Replicas of(long generation, long[] epochs, int[][] backups, int minInSync) {
        Objects.requireNonNull(epochs, "epochs");
        Objects.requireNonNull(backups, "backups");
        if (epochs.length != RoutingTable.GROUPS || backups.length != RoutingTable.GROUPS || minInSync < 1) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "replicas need " + RoutingTable.GROUPS
                    + " epochs and backup lists and minInSync >= 1: " + epochs.length + ", " + backups.length + ", "
                    + minInSync);
        }
        int[][] copy = new int[RoutingTable.GROUPS][];
        for (int g = 0; g < copy.length; g++) {
            copy[g] = backups[g] == null || backups[g].length == 0 ? NONE : backups[g].clone();
        }
        return new Replicas(generation, epochs.clone(), copy, minInSync);
    }

    /** No backups anywhere, every epoch 0: a cluster without replication. */
    public static Replicas none(long generation) {
        int[][] b = new int[RoutingTable.GROUPS][];
        return of(generation, new long[RoutingTable.GROUPS], b, 1);
    }

    /** The routing generation these replicas belong to. */
    public long generation() {
        return generation;
    }

    /** The epoch of {@code group}. */
    public long epoch(int group) {
        return epochs[group];
    }

    /** How many in-sync backups {@code group} has. */
    public int backupCount(int group) {
        return backups[group].length;
    }

    /** The {@code i}-th in-sync backup of {@code group} (a server index). */
    public int backup(int group, int i) {
        return backups[group][i];
    }

    /** Whether server {@code index} is an in-sync backup of {@code group}. */
    public boolean isBackup(int group, int index) {
        for (int b : backups[group]) {
            if (b == index) {
                return true;
            }
        }
        return false;
    }

    /** The fewest copies, the primary's included, that a push is acknowledged with. */
    public int minInSync() {
        return minInSync;
    }

    @Override
    public String toString() {
        int replicated = 0;
        for (int[] b : backups) {
            replicated += b.length > 0 ? 1 : 0;
        }
        return "Replicas[generation " + generation + ", " + replicated + " groups with backups, minInSync "
                + minInSync + "]";
    }
}
