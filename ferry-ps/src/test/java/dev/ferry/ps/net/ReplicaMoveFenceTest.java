package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcResponse;

/**
 * A balancing move P -&gt; T of a group whose backup B keeps its place: after the flip, until P
 * and B install the new table, P must not hand B rows that hold a push T fenced out. The
 * interleaving, driven step by step with raw {@code PUSH} requests (chosen dedupe ids and
 * generations, no client retries): push A acknowledged at P; the move; T installs the flip; push
 * Z at P is applied there but fenced at T ({@code WRONG_SERVER}, not acknowledged); A's retry at
 * P (deduped there) used to replicate P's row, holding Z, to B at the old epoch, without Z's id.
 * Once B is promoted (T lost), Z's retry at B was applied on top of it: acknowledged + one push.
 * In-process members on tcp.
 */
class ReplicaMoveFenceTest extends RawMembersTestBase {

    private static final long ID = 7;
    private static final int GROUP = RoutingTable.groupOf(ID);
    private static final int P = 0;
    private static final int T = 1;
    private static final int B = 2;

    private final List<String> ids = List.of("p", "t", "b");

    private void start() {
        startMembers(ids, true);
    }

    /** A table: {@link #GROUP} owned by {@code owner} at {@code epoch} with {@code backups}, the rest P's. */
    private static Object[] table(long gen, int owner, long epoch, int... backups) {
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, P);
        owners[GROUP] = owner;
        long[] epochs = new long[RoutingTable.GROUPS];
        epochs[GROUP] = epoch;
        int[][] b = new int[RoutingTable.GROUPS][];
        for (int g = 0; g < b.length; g++) {
            b[g] = new int[] {B};
        }
        b[GROUP] = backups;
        return new Object[] {gen, owners, Replicas.of(gen, epochs, b, 1)};
    }

    private void install(Object[] t, int... on) {
        RoutingTable table = RoutingTable.of((long) t[0], ids, addresses, (int[]) t[1]);
        for (int s : on) {
            servers.get(s).install(table, (Replicas) t[2]);
        }
    }

    /** One raw PUSH of {@code grad} on {@link #ID} to {@code server}; the refusal's code, or null if acknowledged. */
    private PsException.Code push(int server, long generation, long dedupe, float grad) throws Exception {
        return push(server, generation, dedupe, grad, ID);
    }

    /** One raw PUSH of {@code grad} on each of {@code ids} to {@code server}; the refusal's code, or null. */
    private PsException.Code push(int server, long generation, long dedupe, float grad, long... ids) throws Exception {
        byte[] name = PsDescriptor.nameBytes("t");
        int n = ids.length;
        int bytes = (int) PsDescriptor.pushBytes(name.length, n, 2);
        try {
            RpcResponse r = raw.channel(addresses.get(server)).call(PsDescriptor.PUSH, bytes, body -> {
                int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 2, n, 0);
                PsDescriptor.stamp(body, generation, dedupe);
                for (int i = 0; i < n; i++) {
                    body.set(PsDescriptor.LONG, at + 8L * i, ids[i]);
                    body.set(PsDescriptor.FLOAT, at + 8L * n + 8L * i, grad);
                    body.set(PsDescriptor.FLOAT, at + 8L * n + 8L * i + 4, grad);
                }
            }, 5_000).get(10, TimeUnit.SECONDS);
            r.release();
            return null;
        } catch (ExecutionException e) {
            return refusal(e, addresses.get(server)).code();
        }
    }

    private float[] row(int server) {
        return row(server, ID);
    }

    private float[] row(int server, long id) {
        float[] out = new float[2];
        stores.get(server).pull("t", 2, new long[] {id}, 0, 1, MemorySegment.ofArray(out));
        return out;
    }

    /** An id of another group than {@link #GROUP}. */
    private static long otherId() {
        long id = ID + 1;
        while (RoutingTable.groupOf(id) == GROUP) {
            id++;
        }
        return id;
    }

    /**
     * A push of two groups, one of which the move source's table hands to the move's target
     * during the push's apply: the push fails with {@code WRONG_SERVER} after its apply. The
     * group that stays must still reach its backup with the push's id: the next push on that row
     * carried the push's effect to the backup without it, and the retry there, after the
     * backup's promotion, was applied twice (found in the long ReplicaKillTest run).
     */
    @Test
    void aPushFailedAfterItsApplyStillReachesTheBackupsOfTheGroupsThatStay() throws Exception {
        start();
        long other = otherId();
        int otherGroup = RoutingTable.groupOf(other);
        long x = 0x3C;
        long y = 0x4D;
        install(table(1, P, 0, B), T, B, P);
        servers.get(P).moveOut(2, new int[] {GROUP}, addresses.get(T));
        Object[] flipped = table(2, T, 1, B);
        java.util.concurrent.atomic.AtomicBoolean once = new java.util.concurrent.atomic.AtomicBoolean(true);
        // P learns of the flip while the push is being applied (T, not yet: it takes the forward).
        MoveSource.afterMovingApplied = () -> {
            if (once.getAndSet(false)) {
                install(flipped, P);
            }
        };
        try {
            assertEquals(PsException.Code.WRONG_SERVER, push(P, 1, x, -1, ID, other),
                    "X fails after its apply: its moving group changed primary meanwhile");
        } finally {
            MoveSource.afterMovingApplied = null;
        }
        assertArrayEquals(new float[] {1, 1}, row(B, other), "the group that stays reached its backup");
        assertNull(push(P, 2, y, -10, other), "Y on the same row, acknowledged");
        assertArrayEquals(new float[] {11, 11}, row(B, other));

        // P is lost: B is promoted for the other group (epoch 1); X's client retries there.
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, P);
        owners[GROUP] = T;
        owners[otherGroup] = B;
        long[] epochs = new long[RoutingTable.GROUPS];
        epochs[GROUP] = 1;
        epochs[otherGroup] = 1;
        int[][] backups = new int[RoutingTable.GROUPS][];
        RoutingTable promoted = RoutingTable.of(3, ids, addresses, owners);
        servers.get(B).install(promoted, Replicas.of(3, epochs, backups, 1));
        servers.get(T).install(promoted, Replicas.of(3, epochs, backups, 1));
        assertNull(push(B, 3, x, -1, other), "X's retry at B, acknowledged");
        assertArrayEquals(new float[] {11, 11}, row(B, other), "X and Y exactly once each: the retry was deduped");
    }

    @Test
    void aRetryOnTheMoveSourceAfterTheFlipDoesNotHandTheBackupAFencedPush() throws Exception {
        start();
        long a = 0x1A;
        long z = 0x2B;
        install(table(1, P, 0, B), T, B, P);
        assertNull(push(P, 1, a, -1), "A acknowledged at P");
        assertArrayEquals(new float[] {1, 1}, row(B), "and replicated to B");

        servers.get(P).moveOut(1, new int[] {GROUP}, addresses.get(T));
        assertArrayEquals(new float[] {1, 1}, row(T), "the snapshot reached T");
        // The controller's flip: T owns the group at epoch 1, B stays its backup; only T knows yet.
        Object[] flipped = table(2, T, 1, B);
        install(flipped, T);

        assertEquals(PsException.Code.WRONG_SERVER, push(P, 1, z, -10), "Z is fenced at T, not acknowledged");
        // A's retry at P (its answer was lost, say): deduped there. It must not give B P's row,
        // which holds Z, without Z's id.
        PsException.Code retry = push(P, 1, a, -1);
        assertEquals(PsException.Code.WRONG_SERVER, retry, "A's retry at P is sent on to T, which owns the group");
        assertArrayEquals(new float[] {1, 1}, row(B), "B holds A only: nothing of Z, whose id it lacks");

        install(flipped, B, P);
        servers.get(P).endMove(1);
        servers.get(T).endMove(1);
        assertNull(push(T, 2, a, -1), "A's retry at T: deduped (the move carried its id), acknowledged");
        assertArrayEquals(new float[] {1, 1}, row(T));

        // T is lost: B, its in-sync backup, is promoted (epoch 2); Z's client retries there.
        install(table(3, B, 2), B, P);
        assertNull(push(B, 3, z, -10), "Z's retry at B, acknowledged");
        assertArrayEquals(new float[] {11, 11}, row(B), "A and Z exactly once each");
    }
}
