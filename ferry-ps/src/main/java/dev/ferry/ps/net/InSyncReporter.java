package dev.ferry.ps.net;

/**
 * Where a primary reports a backup that fell out of sync (no answer within the replication
 * timeout, unreachable, or no longer in the group's in-sync set at the primary's epoch): the
 * cluster's controller removes it from the in-sync sets, and the primary acknowledges the push
 * only once the table installed on it shows the removal.
 */
@FunctionalInterface
public interface InSyncReporter {

    /**
     * Asks for member {@code backup} to be removed from the in-sync sets of {@code groups}, each
     * at the epoch of the same index in {@code epochs}; returns without waiting for it. Called on
     * handler threads, possibly several at once.
     */
    void outOfSync(String backup, int[] groups, long[] epochs);
}
