package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;

/**
 * With replicas on training (r = 2) only the primary of a group exports its rows, so each row
 * travels once; after a failover the promoted backup exports them, and the follower, seeing the
 * slots it exports change, catches up with it again.
 */
class ExportPrimariesTest extends ExportTestBase {

    @Test
    void onlyThePrimaryExportsAndAPromotedBackupTakesOver() throws Exception {
        ParameterServer aPs = ParameterServer.create(PsConfig.defaults());
        ParameterServer bPs = ParameterServer.create(PsConfig.defaults());
        PsServer a = PsServer.openMember(aPs, "a", null, rpc(), false);
        PsServer b = PsServer.openMember(bPs, "b", null, rpc(), false);
        ExportService aExport = ExportService.attach(a);
        ExportService bExport = ExportService.attach(b);
        String aAddress = a.listen(config("tcp"));
        String bAddress = b.listen(config("tcp"));
        track(aPs, a);
        track(bPs, b);
        List<String> members = List.of("a", "b");
        List<String> addresses = List.of(aAddress, bAddress);
        long[] epochs = new long[RoutingTable.GROUPS];
        Arrays.fill(epochs, 1);
        int[][] backups = new int[RoutingTable.GROUPS][];
        Arrays.fill(backups, new int[] {1});
        RoutingTable first = RoutingTable.of(1, members, addresses, new int[RoutingTable.GROUPS]);
        a.install(first, Replicas.of(1, epochs, backups, 1));
        b.install(first, Replicas.of(1, epochs, backups, 1));
        // The same rows on both, as replication leaves them.
        long[] ids = ids(2_000, 17);
        for (ParameterServer ps : List.of(aPs, bPs)) {
            ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
            push(ps, ids, 1f);
        }
        Serving s = serving();
        try (DeltaFollower f = DeltaFollower.start(s.server(), () -> List.of(aAddress, bAddress), rpc(),
                config("tcp"), 20)) {
            await(() -> equal(aPs, s.ps()), "serving equal to the primary");
            await(() -> f.rounds() >= 2, "two rounds");
            assertEquals(0, bExport.rowsExported(), "the backup exports nothing");
            if (f.failures() == 0) {
                assertEquals(ids.length, aExport.rowsExported(), "each row once, from its primary");
                assertEquals(ids.length, f.rowsApplied() + f.rowsOlder());
                assertEquals(2, f.resyncs(), "one catch-up per training server");
            }
            long resyncs = f.resyncs();
            // Failover: b is the primary of every group, a of none; b takes more pushes.
            RoutingTable second = RoutingTable.of(2, members, addresses, filled(1));
            a.install(second, Replicas.none(2));
            b.install(second, Replicas.none(2));
            long[] more = Arrays.copyOf(ids, 300);
            push(bPs, more, 2f);
            await(() -> equal(bPs, s.ps()), "serving equal to the promoted backup");
            await(() -> f.resyncs() >= resyncs + 2, "a catch-up with both servers after their slots changed: " + f.resyncs()
                    + ", " + f.lastFallback() + ", " + f.lastError());
            assertTrue(bExport.rowsExported() >= ids.length, "b sent its rows: " + bExport.rowsExported());
            long aSent = aExport.rowsExported();
            long rounds = f.rounds();
            push(aPs, more, 5f); // a stale copy on the old primary: not exported any more
            await(() -> f.rounds() >= rounds + 3, "three more rounds");
            assertEquals(aSent, aExport.rowsExported());
            assertTrue(equal(bPs, s.ps()));
        }
    }

    private static int[] filled(int owner) {
        int[] groups = new int[RoutingTable.GROUPS];
        Arrays.fill(groups, owner);
        return groups;
    }
}
