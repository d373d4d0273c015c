package dev.ferry.ps.net;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;
import java.util.function.Supplier;

import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.SparseTable;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.transport.TransportConfig;

/**
 * The primary's end of push replication: applies a push, sends the updated whole rows (weights,
 * optimizer state, step count) with the push's dedupe id to every in-sync backup of their groups
 * ({@code REPLICATE}, {@link ReplicationDescriptor}), and returns only when every one of them
 * applied them, or was removed from the in-sync set by the controller first. A dense push is the
 * same with the tensor's whole row ({@code REPLICATE_DENSE}, {@link DenseReplication}) for the
 * tensor's group. The round trip itself is {@link BackupCalls}.
 *
 * <p>One push at a time per slot group, from the apply to the last backup's answer (a lock per
 * group, taken in ascending order). Whole rows are cumulative: without it, push B could copy a
 * row already holding push A and reach a backup before A's own rows; if the primary then died,
 * the client's retry of A at that backup would find A in the row but not in the dedupe window,
 * and apply it twice. With it, a backup holds a push's effect exactly when it recorded its id.
 * Pushes on distinct groups overlap.
 *
 * <p>Dedupe: a push whose id is in a group's {@link DedupeWindow} was applied to that group
 * already (here, or on the primary that replicated it here before a failover): its ids of that
 * group are not applied again, but their current rows are replicated again, so the backups
 * have it too before it is acknowledged.
 *
 * <p>A push applied on a group led here whose rows may have reached no backup (its move forward
 * or its replication failed) is kept and sent to the group's backups, with its id, before the
 * next push on the group ({@link #keep}).
 *
 * <p>A backup that does not answer within the replication timeout, or answers that it is not in
 * sync, is reported ({@link InSyncReporter}); the push waits until the routing table installed
 * here no longer lists it, then goes on without it. Below {@link Replicas#minInSync()} copies a
 * push is refused before it is applied ({@code NOT_ENOUGH_REPLICAS}). A backup that knows a newer
 * epoch fences this server out: the push fails with {@code WRONG_SERVER}, is not acknowledged, and
 * its client retries it at the new primary.
 */
final class Replicator implements AutoCloseable {

    /** Applies (part of) a push locally: the move-aware apply of {@link PsServer}. */
    @FunctionalInterface
    interface Apply {
        void apply(long[] ids, int count, MemorySegment gradients, long remainingMillis);
    }

    private final ParameterServer ps;
    private final PsServer server;
    private final BackupCalls backups;
    private final DedupeWindow window;
    private final ReentrantLock[] locks = new ReentrantLock[RoutingTable.GROUPS];
    private final java.util.concurrent.atomic.LongAdder deduped = new java.util.concurrent.atomic.LongAdder();
    /** Per group, the pushes kept for its backups ({@link #keep}); each guarded by the group's lock. */
    private final KeptPushes keptPushes = new KeptPushes(locks);

    Replicator(ParameterServer ps, PsServer server, RpcConfig config, Supplier<TransportConfig> transport,
            DedupeWindow window) {
        this.ps = ps;
        this.server = server;
        this.backups = new BackupCalls(server, config, transport);
        this.window = window;
        for (int g = 0; g < locks.length; g++) {
            locks[g] = new ReentrantLock();
        }
    }

    /** Sets the replication timeout and where lost backups are reported. */
    void configure(long timeoutMillis, InSyncReporter reporter) {
        backups.configure(timeoutMillis, reporter);
    }

    /** Pushes some of whose ids were applied already (a client's retry after a failover or a lost answer). */
    long deduped() {
        return deduped.sum();
    }

    /** Per-thread scratch of a push: its groups, marks, filtered ids and gradients. */
    private static final class Scratch {
        final boolean[] marked = new boolean[RoutingTable.GROUPS];
        /** Per group of the push being applied: whether its window held the push's id already. */
        final boolean[] seen = new boolean[RoutingTable.GROUPS];
        int[] groups = new int[64];
        long[] ids = new long[1024];
        float[] grads = new float[1024];
    }

    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    /**
     * Applies a push checked against view {@code v} and replicates it; returns when it may be
     * acknowledged.
     *
     * @throws PsException {@code NOT_ENOUGH_REPLICAS} (before applying) below the minimum in-sync
     *                     copies; {@code WRONG_SERVER} if a backup fenced this server out (not
     *                     acknowledged; retried by the client at the new primary);
     *                     {@code CLOSED} if the groups' locks or the in-sync change did not come in time
     */
    void push(PsServer.View v, String name, int dimension, long[] ids, int count, MemorySegment gradients, long dedupe,
            long remainingMillis, Apply apply) {
        Scratch s = SCRATCH.get();
        int groups = groupsOf(ids, count, s);
        run(v, s.groups, groups, dedupe, remainingMillis, ReplicationDescriptor.REPLICATE, deadline -> {
            // The window once per group, not per id (a scan of its ring each): it was a fifth of the
            // handler threads' CPU with batches of 1,024 ids. Only this push records on these groups
            // meanwhile (it holds their locks): its move forward does (a repeat there is skipped; one
            // left by a move that ended meanwhile only takes a slot).
            int seen = 0;
            for (int i = 0; i < groups; i++) {
                boolean has = window.contains(s.groups[i], dedupe);
                s.seen[s.groups[i]] = has;
                seen += has ? 1 : 0;
            }
            try {
                applyNew(name, dimension, ids, count, gradients, dedupe, deadline, apply, s, seen);
                for (int i = 0; i < groups; i++) {
                    int g = s.groups[i];
                    if (!s.seen[g]) {
                        if (server.movingOut(g)) {
                            window.record(g, dedupe);
                        } else {
                            window.recordAbsent(g, dedupe);
                        }
                    }
                }
            } finally {
                for (int i = 0; i < groups; i++) {
                    s.seen[s.groups[i]] = false;
                }
            }
        }, (now, backup, its, epochs) -> sparseBody(now, name, ids, count, dedupe, its, epochs), g -> {
            // The ids are the request's (a per-thread array): a kept push takes its own copy.
            long[] mine = java.util.Arrays.stream(ids, 0, count).filter(id -> RoutingTable.groupOf(id) == g).toArray();
            return (now, backup, its, epochs) -> sparseBody(now, name, mine, mine.length, dedupe, its, epochs);
        });
    }

    /**
     * A dense push ({@link DenseReplication}): {@code apply} steps the tensor here (deduped by the
     * group's window, forwarded if the group moves: {@link MoveSource#pushDense}); then its whole
     * row goes with the push's dedupe id to every in-sync backup of the tensor's group, exactly as
     * a sparse push's rows do, under the same group lock, checks and fencing. A deduped retry
     * replicates the current row again, so the backups have it before it is acknowledged.
     *
     * @throws PsException as {@link #push}
     */
    void pushDense(PsServer.View v, DenseTensor tensor, long dedupe, long remainingMillis, DenseApply apply) {
        Scratch s = SCRATCH.get();
        s.groups[0] = DenseMove.groupOf(tensor.name());
        run(v, s.groups, 1, dedupe, remainingMillis, DenseReplication.REPLICATE_DENSE,
                deadline -> apply.apply(TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()) + 100),
                (now, backup, its, epochs) -> DenseReplication.body(now.generation(), dedupe, its[0], epochs[0], tensor),
                null);
    }

    /**
     * A dense tensor just created here: its first row (no steps yet) goes to the in-sync backups
     * of its group, so that a backup promoted before the first push serves it too. Best effort:
     * a backup that misses it gets it with the first push.
     */
    void createdDense(PsServer.View v, DenseTensor tensor, long remainingMillis) {
        try {
            pushDense(v, tensor, 0, remainingMillis, left -> { });
        } catch (RuntimeException notYet) {
            // The tensor exists here; the first push's row creates it on the backups.
        }
    }

    /** Steps a dense tensor locally within {@code remainingMillis}: the move-aware apply of {@link PsServer}. */
    @FunctionalInterface
    interface DenseApply {
        void apply(long remainingMillis);
    }

    /** The local step of a push, before {@code deadline} (nanoTime). */
    @FunctionalInterface
    private interface Step {
        void apply(long deadline);
    }

    /**
     * The push protocol, sparse or dense: the groups' locks, the checks, the local step, the
     * checks again, then {@code method} with {@code body} to every in-sync backup.
     */
    private void run(PsServer.View v, int[] gs, int groups, long dedupe, long remainingMillis,
            RpcMethod method, Step step, BackupCalls.Body body, IntFunction<BackupCalls.Body> keep) {
        IntFunction<BackupCalls.Body> kept = keep == null ? g -> body : keep;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, remainingMillis - 100));
        Replicas replicas = v.replicas();
        int locked = 0;
        try {
            for (; locked < groups; locked++) {
                PushLocks.lockOrBusy(locks[gs[locked]], deadline - System.nanoTime(),
                        "the pushes replicated ahead of it on the same slot groups");
            }
            for (int i = 0; i < groups; i++) {
                int g = gs[i];
                if (1 + replicas.backupCount(g) < replicas.minInSync()) {
                    throw new PsException(PsException.Code.NOT_ENOUGH_REPLICAS, "group " + g + " has "
                            + (1 + replicas.backupCount(g)) + " in-sync copies, fewer than the " + replicas.minInSync()
                            + " a push needs; the push was not applied");
                }
            }
            Runnable hook = afterLocked;
            if (hook != null) {
                hook.run();
            }
            v = current(v, gs, groups, false);
            try {
                step.apply(deadline);
            } catch (RuntimeException failed) {
                // Some ids may be applied (a move's forward that failed after its apply records them).
                replicateApplied(v, dedupe, deadline, gs, groups, method, body, kept);
                throw failed;
            }
            // The view once more: the apply may have waited (a copy's forward until the copy ended).
            PsServer.View now;
            try {
                now = current(v, gs, groups, true);
            } catch (PsException moved) {
                replicateApplied(v, dedupe, deadline, gs, groups, method, body, kept);
                throw moved;
            }
            try {
                keptPushes.sendThen(backups, now, deadline, gs, groups, method, body);
            } catch (RuntimeException failed) {
                for (int i = 0; i < groups; i++) {
                    keep(now, gs[i], dedupe, method, kept);
                }
                throw failed;
            }
            Runnable replicated = afterReplicated;
            if (replicated != null) {
                replicated.run();
            }
        } finally {
            for (int i = 0; i < locked; i++) {
                locks[gs[i]].unlock();
            }
        }
    }

    /**
     * A push that fails after (part of) its apply: the groups it was applied to (their window
     * holds its id) and that this server still leads at the same epoch get its rows all the same,
     * with its id, before the failure is answered and the groups' locks go. Every push applied on
     * a group this server leads must reach the group's backups before the next one on it: the
     * next push's whole rows would otherwise carry this one's effect to the backups without its
     * id, and the client's retry of it, after the backup's promotion, was applied twice there
     * (a push of two groups, one of which moved during its apply, failed with {@code WRONG_SERVER}
     * after the apply and reached no backup). Groups that changed primary are left out: their rows
     * here are no longer the group's, and so are groups being moved: their new owner may own them
     * already and have fenced pushes that are in these rows (the move's forward decides instead).
     * Best effort: the push fails either way.
     */
    private void replicateApplied(PsServer.View checked, long dedupe, long deadline, int[] gs, int groups,
            RpcMethod method, BackupCalls.Body body, IntFunction<BackupCalls.Body> keep) {
        PsServer.View now = server.view();
        Replicas was = checked.replicas();
        Replicas is = now.replicas();
        if (is == null || was == null || now.table() == null || now.self() < 0) {
            return;
        }
        int[] led = new int[groups];
        int k = 0;
        for (int i = 0; i < groups; i++) {
            int g = gs[i];
            if (window.contains(g, dedupe) && now.table().ownerOfGroup(g) == now.self() && is.epoch(g) == was.epoch(g)) {
                if (server.movingOut(g)) {
                    keep(now, g, dedupe, method, keep); // for the next push on it that reaches the backups
                } else {
                    led[k++] = g;
                }
            }
        }
        if (k == 0) {
            return;
        }
        try {
            keptPushes.sendThen(backups, now, deadline, led, k, method, body);
        } catch (RuntimeException alsoFailed) {
            // The push fails with its first reason; a backup lost here was reported as usual.
            for (int i = 0; i < k; i++) {
                keep(now, led[i], dedupe, method, keep);
            }
        }
    }

    /**
     * A push applied here, on a group led here, whose rows may have reached no backup: its own
     * forward to a move's target failed (the group is moving, whose target may own it already:
     * its rows are not sent to the backups now, see {@link #replicateApplied}), or its replication
     * did. Its rows (current then) and its id go to the group's backups before the next push on
     * the group replicates ({@link KeptPushes#sendThen}), whose whole rows would carry its effect
     * there without its id: after a promotion, its client's retry was applied twice. That next
     * push reaching the backups shows this server still leads the group at the same epoch (and a
     * move's target had not fenced it): the same condition under which its own rows go. Guarded
     * by the group's lock ({@link KeptPushes}).
     */
    private void keep(PsServer.View now, int g, long dedupe, RpcMethod method, IntFunction<BackupCalls.Body> keep) {
        if (dedupe == 0 || now.replicas() == null || !window.contains(g, dedupe)) {
            return;
        }
        keptPushes.keep(g, now.replicas().epoch(g), method, keep.apply(g));
    }

    /** Pushes kept for the backups of {@code group} (tests). */
    int kept(int group) {
        return keptPushes.count(group);
    }

    /** Tests only: runs once a push holds its groups' locks, before it looks at the replicas again. */
    static volatile Runnable afterLocked;
    /** Tests only: runs once every backup has a push, before it is acknowledged (null outside tests). */
    static volatile Runnable afterReplicated;

    /**
     * The view installed now, for a push checked against {@code checked} that may have waited
     * since (for its groups' locks, or in its apply): a copy that completed meanwhile added an
     * in-sync backup that must get this push's rows (replicating to the checked view's backups
     * only would leave the new backup without the push, and with its effect but not its dedupe id
     * after the next push on the row). A group whose primary changed meanwhile fails the push with
     * {@code WRONG_SERVER}: before the apply nothing was applied; after it, only the groups still
     * led here get the rows ({@link #replicateApplied}); the client retries at the new primary, as
     * after a {@code FENCED} answer.
     */
    private PsServer.View current(PsServer.View checked, int[] gs, int groups, boolean applied) {
        PsServer.View now = server.view();
        if (now == checked || now.generation() == checked.generation()) {
            return checked;
        }
        Replicas was = checked.replicas();
        Replicas is = now.replicas();
        for (int i = 0; i < groups; i++) {
            int g = gs[i];
            if (is == null || now.table() == null || now.self() < 0 || now.table().ownerOfGroup(g) != now.self()
                    || is.epoch(g) != was.epoch(g)) {
                throw PsDescriptor.wrongServer(now.generation(), "group " + g + " changed primary while the push "
                        + "waited here; the push was " + (applied ? "applied here (and replicated for the groups "
                        + "still led here) but " : "") + "not acknowledged");
            }
        }
        if (!applied) {
            for (int i = 0; i < groups; i++) {
                int g = gs[i];
                if (1 + is.backupCount(g) < is.minInSync()) {
                    throw new PsException(PsException.Code.NOT_ENOUGH_REPLICAS, "group " + g + " has "
                            + (1 + is.backupCount(g)) + " in-sync copies, fewer than the " + is.minInSync()
                            + " a push needs; the push was not applied");
                }
            }
        }
        return now;
    }

    /**
     * Applies the ids whose group has not seen push {@code dedupe} yet ({@code s.seen}, for
     * {@code seen} of the push's groups).
     */
    private void applyNew(String name, int dimension, long[] ids, int count, MemorySegment gradients, long dedupe,
            long deadline, Apply apply, Scratch s, int seen) {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()) + 100;
        if (seen == 0) {
            apply.apply(ids, count, gradients, left);
            return;
        }
        int fresh = 0;
        for (int i = 0; i < count; i++) {
            if (!s.seen[RoutingTable.groupOf(ids[i])]) {
                fresh++;
            }
        }
        deduped.increment();
        if (s.ids.length < count) {
            s.ids = new long[count * 2];
        }
        int k = 0;
        for (int i = 0; i < count; i++) {
            if (s.seen[RoutingTable.groupOf(ids[i])]) {
                s.ids[k++] = ids[i];
            }
        }
        // First, before anything is applied: a move's new owner may fence the retry out.
        server.resendMoving(name, s.ids, k, left, dedupe);
        if (fresh == 0) {
            return;
        }
        if (s.grads.length < fresh * dimension) {
            s.grads = new float[fresh * dimension * 2];
        }
        MemorySegment grads = MemorySegment.ofArray(s.grads);
        long rowBytes = (long) dimension * Float.BYTES;
        k = 0;
        for (int i = 0; i < count; i++) {
            if (!s.seen[RoutingTable.groupOf(ids[i])]) {
                s.ids[k] = ids[i];
                MemorySegment.copy(gradients, i * rowBytes, grads, k * rowBytes, rowBytes);
                k++;
            }
        }
        apply.apply(s.ids, fresh, grads.asSlice(0, fresh * rowBytes), left);
    }

    /** A sparse {@code REPLICATE} body: every id of the push in {@code its} (sorted groups), with its whole row. */
    private byte[] sparseBody(PsServer.View v, String name, long[] ids, int count, long dedupe, int[] its,
            long[] epochs) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (java.util.Arrays.binarySearch(its, RoutingTable.groupOf(ids[i])) >= 0) {
                n++;
            }
        }
        long[] mine = new long[n];
        n = 0;
        for (int i = 0; i < count; i++) {
            if (java.util.Arrays.binarySearch(its, RoutingTable.groupOf(ids[i])) >= 0) {
                mine[n++] = ids[i];
            }
        }
        int m = its.length;
        SparseTable table = ps.table(name);
        long rowBytes = RowTransfer.rowBytes(table);
        byte[] nameBytes = PsDescriptor.nameBytes(name);
        byte[] body = new byte[Math.toIntExact(ReplicationDescriptor.requestBytes(nameBytes.length, m, n, rowBytes))];
        MemorySegment seg = MemorySegment.ofArray(body);
        PsDescriptor.writeHeader(seg, PsDescriptor.SPARSE, nameBytes, table.dimension(), n, m);
        PsDescriptor.stamp(seg, v.generation(), dedupe);
        long groupsAt = ReplicationDescriptor.groupsAt(seg);
        for (int i = 0; i < m; i++) {
            ReplicationDescriptor.writeGroup(seg, groupsAt, i, its[i], epochs[i]);
        }
        long rowsAt = groupsAt + (long) m * ReplicationDescriptor.GROUP_ENTRY;
        RowTransfer.copy(table, mine, n, seg.asSlice(rowsAt, n * rowBytes));
        return body;
    }
    /** The sorted distinct groups of {@code ids} into {@code s.groups}; returns how many. */
    private static int groupsOf(long[] ids, int count, Scratch s) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            int g = RoutingTable.groupOf(ids[i]);
            if (!s.marked[g]) {
                s.marked[g] = true;
                if (n == s.groups.length) {
                    s.groups = java.util.Arrays.copyOf(s.groups, n * 2);
                }
                s.groups[n++] = g;
            }
        }
        for (int i = 0; i < n; i++) {
            s.marked[s.groups[i]] = false;
        }
        java.util.Arrays.sort(s.groups, 0, n);
        return n;
    }

    @Override
    public void close() {
        backups.close();
    }
}
