package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;

/**
 * A push checked against one routing generation and replicated after a newer one was installed
 * (it waited for its groups' locks, or in its apply until a copy ended): the newer table's
 * in-sync backups must get its rows, and a group that changed primary meanwhile must fail it
 * unacknowledged. Forced with {@link Replicator#afterLocked}; in-process members on tcp.
 */
class ReplicaStaleViewTest extends PsNetTestBase {

    private static final long ID = 7;

    private final List<String> ids = List.of("m0", "m1");
    private final List<String> addresses = new ArrayList<>();
    private final List<PsServer> servers = new ArrayList<>();
    private final List<ParameterServer> stores = new ArrayList<>();

    private PsClient start() {
        openMembers("tcp", ids, addresses, servers, stores, false);
        install(1, 0, false, 0);
        PsClient client = client("tcp", List.of(addresses.get(0)));
        client.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
        for (ParameterServer ps : stores) {
            if (!hasTable(ps)) {
                ps.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
            }
        }
        return client;
    }

    private static boolean hasTable(ParameterServer ps) {
        try {
            ps.table("t");
            return true;
        } catch (PsException unknown) {
            return false;
        }
    }

    /** Generation {@code gen}: every group owned by {@code owner}, the other member its backup or not. */
    private void install(long gen, int owner, boolean backup, long epoch) {
        int[] owners = new int[RoutingTable.GROUPS];
        java.util.Arrays.fill(owners, owner);
        long[] epochs = new long[RoutingTable.GROUPS];
        java.util.Arrays.fill(epochs, epoch);
        int[][] backups = new int[RoutingTable.GROUPS][];
        if (backup) {
            for (int g = 0; g < backups.length; g++) {
                backups[g] = new int[] {1 - owner};
            }
        }
        RoutingTable table = RoutingTable.of(gen, ids, addresses, owners);
        Replicas replicas = Replicas.of(gen, epochs, backups, 1);
        // Backups first, as the hook would race them anyway.
        servers.get(1).install(table, replicas);
        servers.get(0).install(table, replicas);
    }

    private float[] row(int server) {
        float[] out = new float[2];
        stores.get(server).pull("t", 2, new long[] {ID}, 0, 1, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void aBackupAddedWhileThePushWaitedGetsItsRows() throws Exception {
        PsClient client = start();
        AtomicBoolean first = new AtomicBoolean(true);
        // The copy to m1 completes while the push holds its locks: generation 2 lists m1 in sync.
        Replicator.afterLocked = () -> {
            if (first.getAndSet(false)) {
                install(2, 0, true, 0);
            }
        };
        try {
            client.push("t", new long[] {ID}, new float[] {-1, -1});
        } finally {
            Replicator.afterLocked = null;
        }
        assertFalse(first.get(), "the hook ran");
        assertArrayEquals(new float[] {1, 1}, row(0), "applied once on the primary");
        // Before the fix the push went to generation 1's backups (none): m1, in sync, lacked it,
        // and would have held it without its dedupe id after the next push on the row.
        assertArrayEquals(new float[] {1, 1}, row(1), "the backup in sync when the rows were copied has them");
        // Handed over to m1 (epoch 1), which goes on from the replicated row.
        install(3, 1, false, 1);
        client.push("t", new long[] {ID}, new float[] {-2, -2});
        assertArrayEquals(new float[] {3, 3}, client.pull("t", new long[] {ID}));
    }

    @Test
    void aPrimaryChangeWhileThePushWaitedFailsItBeforeTheApply() throws Exception {
        PsClient client = start();
        install(2, 0, true, 0);
        AtomicBoolean first = new AtomicBoolean(true);
        // m1 becomes the primary (epoch 1) while the push waits on m0 for its groups' locks.
        Replicator.afterLocked = () -> {
            if (first.getAndSet(false)) {
                install(3, 1, false, 1);
            }
        };
        try {
            client.push("t", new long[] {ID}, new float[] {-5, -5});
        } finally {
            Replicator.afterLocked = null;
        }
        assertFalse(first.get(), "the hook ran");
        assertArrayEquals(new float[] {0, 0}, row(0), "refused on the deposed primary before the apply");
        assertArrayEquals(new float[] {5, 5}, row(1), "retried at the new primary, applied once");
        assertTrue(client.retries() > 0, "the client retried after WRONG_SERVER");
        assertEquals(5f, client.pull("t", new long[] {ID})[0]);
    }
}
