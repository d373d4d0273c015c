package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcResponse;

/**
 * A copy P -&gt; C of a group has just flipped (C is the group's new backup) and P has installed
 * that table, but C has not yet: a push on P replicates to C, which answers that it is behind
 * until the replication timeout; P reports C out of sync and the push waits, holding the move
 * barrier's read lock, for the table that drops C. The member's event thread meanwhile ends the
 * copy on P, then would install that table. Ending the move used to wait for the barrier's write
 * lock, so the table could not be installed until the push gave up at its deadline ({@code
 * CLOSED}: "backup c0 did not answer and the controller did not take it out of the in-sync set in
 * time" in ClusterTest under load). Now the move ends without waiting for the pushes in flight:
 * the table is installed and the push is acknowledged.
 */
class MoveEndStallTest extends RawMembersTestBase {

    private static final long ID = 7;
    private static final int GROUP = RoutingTable.groupOf(ID);
    private static final int P = 0;
    private static final int C = 1;

    private final List<String> ids = List.of("p", "c");

    private void start() {
        startMembers(ids, true);
    }

    /** Every group P's at epoch 0; {@link #GROUP} backed up by {@code backups}, the others by none. */
    private void install(long gen, int[] backups, int... on) {
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, P);
        int[][] b = new int[RoutingTable.GROUPS][];
        Arrays.fill(b, new int[0]);
        b[GROUP] = backups;
        RoutingTable table = RoutingTable.of(gen, ids, addresses, owners);
        for (int s : on) {
            servers.get(s).install(table, Replicas.of(gen, new long[RoutingTable.GROUPS], b, 1));
        }
    }

    private CompletableFuture<RpcResponse> push(long generation, long dedupe, float grad) {
        byte[] name = PsDescriptor.nameBytes("t");
        int bytes = (int) PsDescriptor.pushBytes(name.length, 1, 2);
        return raw.channel(addresses.get(P)).call(PsDescriptor.PUSH, bytes, body -> {
            int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 2, 1, 0);
            PsDescriptor.stamp(body, generation, dedupe);
            body.set(PsDescriptor.LONG, at, ID);
            body.set(PsDescriptor.FLOAT, at + 8, grad);
            body.set(PsDescriptor.FLOAT, at + 12, grad);
        }, 5_000);
    }

    /** The refusal's code, or null if acknowledged. */
    private PsException.Code outcome(CompletableFuture<RpcResponse> call) throws Exception {
        try {
            call.get(15, TimeUnit.SECONDS).release();
            return null;
        } catch (ExecutionException e) {
            return refusal(e, addresses.get(P)).code();
        }
    }

    private float[] row(int server) {
        float[] out = new float[2];
        stores.get(server).pull("t", 2, new long[] {ID}, 0, 1, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void aMoveEndsWithoutWaitingForAPushThatWaitsForTheNextTable() throws Exception {
        start();
        install(1, new int[0], P, C);
        CountDownLatch reported = new CountDownLatch(1);
        servers.get(P).replication(200, (backup, groups, epochs) -> {
            assertEquals("c", backup);
            reported.countDown();
        });
        servers.get(P).moveOut(2, new int[] {GROUP}, addresses.get(C), true);
        // The copy flipped: P installs the table naming C a backup; C lags behind it.
        install(2, new int[] {C}, P);
        CompletableFuture<RpcResponse> push = push(2, 0x77, -3);
        assertTrue(reported.await(10, TimeUnit.SECONDS), "C, behind, was reported out of sync");
        // The event thread: ends the copy, then installs the table without C.
        servers.get(P).endMove(2);
        install(3, new int[0], P);
        assertNull(outcome(push), "acknowledged once P's table dropped C");
        assertArrayEquals(new float[] {3, 3}, row(P));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (servers.get(P).movingOut() != -1 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(-1, servers.get(P).movingOut(), "the copy is gone once the push let go of the barrier");
    }
}
