package dev.ferry.ps.net;

import java.util.ArrayDeque;
import java.util.concurrent.locks.ReentrantLock;

import dev.ferry.rpc.RpcMethod;

/**
 * Per slot group, the pushes applied on a group led here whose rows may have reached no backup
 * (their move forward or their replication failed), oldest first: each is sent to the group's
 * backups with its id before the next push on the group replicates ({@link #sendThen}), whose
 * whole rows would otherwise carry its effect there without its id. At most
 * {@link DedupeWindow#PER_GROUP} per group, the oldest dropped. Each group's queue is guarded by
 * that group's push lock (one of {@code locks}, held by the calling thread: asserted).
 */
final class KeptPushes {

    /** A kept push: the epoch it was applied at and its request. */
    private record Kept(long epoch, RpcMethod method, BackupCalls.Body body) {
    }

    /** One group's kept pushes, oldest first. */
    private static final class Queue extends ArrayDeque<Kept> {
        private static final long serialVersionUID = 1L;
    }

    private final ReentrantLock[] locks;
    private final Queue[] byGroup = new Queue[RoutingTable.GROUPS];

    /** @param locks the per-group push locks that guard each group's queue */
    KeptPushes(ReentrantLock[] locks) {
        this.locks = locks;
    }

    /** Keeps a push on {@code group}, applied at {@code epoch}, for the group's backups. */
    void keep(int group, long epoch, RpcMethod method, BackupCalls.Body body) {
        assert locks[group].isHeldByCurrentThread();
        Queue q = byGroup[group];
        if (q == null) {
            q = new Queue();
            byGroup[group] = q;
        }
        if (q.size() == DedupeWindow.PER_GROUP) {
            q.removeFirst();
        }
        q.addLast(new Kept(epoch, method, body));
    }

    /** Pushes kept for the backups of {@code group} (tests). */
    int count(int group) {
        Queue q = byGroup[group];
        return q == null ? 0 : q.size();
    }

    /**
     * Replicates {@code body} to the backups of {@code gs[0, groups)}, first sending the pushes
     * kept for these groups, oldest first; those of another epoch are dropped (this server led the
     * group before, and a move or promotion since reset what it holds). A kept push is forgotten
     * once its backups have it.
     */
    void sendThen(BackupCalls backups, PsServer.View now, long deadline, int[] gs, int groups, RpcMethod method,
            BackupCalls.Body body) {
        for (int i = 0; i < groups; i++) {
            int g = gs[i];
            assert locks[g].isHeldByCurrentThread();
            Queue q = byGroup[g];
            while (q != null && !q.isEmpty()) {
                Kept k = q.peekFirst();
                if (k.epoch() == now.replicas().epoch(g)) {
                    backups.replicate(now, deadline, new int[] {g}, 1, k.method(), k.body());
                }
                q.removeFirst();
            }
        }
        backups.replicate(now, deadline, gs, groups, method, body);
    }
}
