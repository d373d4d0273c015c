package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;

/**
 * A training server process ({@code ClusterServerMain}, a child JVM) SIGKILLed while a serving
 * member pages through its rows (a resync of 100,000 rows, 25 pages): the poll fails and is
 * counted with the server named, no page is refused or applied in part (every row serving holds
 * is whole and training's), serving keeps serving and asking. (A restarted training server is
 * caught up with from its new log: {@code ExportCatchUpTest}; restarting the only member of a
 * training cluster under the same id is a cluster matter left out here.)
 */
class ExportTrainingKillTest {

    private static final int DIM = 4;
    private static final int IDS = 100_000;
    private static final int SESSION_MILLIS = 1_500;

    @Test
    void aTrainingServerKilledMidPollLeavesServingWithWholeRows() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withReplication(1, 1);
            ClusterConfig serve = ClusterConfig.of(zk.getConnectString(), "serve").withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(5_000);
            FollowedCluster followed = FollowedCluster.of(train.uri(), "tcp");
            ExportClusterTest.Node s0 = null;
            long[] ids = new long[IDS];
            for (int i = 0; i < IDS; i++) {
                ids[i] = i;
            }
            try {
                ChildJvm first = startTraining(train, children);
                String address = first.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                first.expect(ClusterServerMain.JOINED, 60_000);
                try (PsClient trainer = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + address)) {
                    Members.await60(() -> {
                        try {
                            trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                            return true;
                        } catch (RuntimeException noRoutingTableYet) {
                            return false;
                        }
                    }, "the training member's routing table");
                    pushAll(trainer, ids, 1);
                }
                s0 = ExportClusterTest.serving(serve, "s0", followed);
                ExportClusterTest.Node serving = s0;
                Members.await60(() -> serving.follower().rowsApplied() > 0, "the first page applied");
                first.kill();
                long appliedAtKill = serving.follower().rowsApplied();
                assertTrue(appliedAtKill < IDS, "killed after the whole resync (" + appliedAtKill + " rows)");
                Members.await60(() -> serving.follower().failures() > 0, "the failed poll");
                assertEquals(0, serving.follower().rejectedPages());
                assertTrue(serving.follower().lastError().contains("training server"), serving.follower().lastError());
                // Serving serves what it has: whole rows, each training's value, the others not yet there.
                try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + s0.address())) {
                    float[] got = reader.pull("emb", ids);
                    int whole = 0;
                    for (int i = 0; i < IDS; i++) {
                        float want = (i % 1_000) + 1;
                        float[] row = Arrays.copyOfRange(got, i * DIM, (i + 1) * DIM);
                        if (row[0] == want) {
                            assertArrayEquals(new float[] {want, want, want, want}, row, "row " + i);
                            whole++;
                        } else {
                            assertArrayEquals(new float[DIM], row, "row " + i + " is either training's or absent");
                        }
                    }
                    assertTrue(whole >= appliedAtKill && whole < IDS, whole + " rows on serving at the kill");
                }
                // It goes on polling (the dead member leaves the list once its session expires) and
                // serving: nothing more is applied, nothing half.
                long rounds = serving.follower().rounds();
                Members.await60(() -> serving.follower().rounds() > rounds + 2, "more rounds");
                assertEquals(appliedAtKill, serving.follower().rowsApplied());
                System.out.printf("[export-training-kill] training SIGKILLed after %d of %d rows were applied on"
                        + " serving; %d failed polls, serving kept whole rows%n", appliedAtKill, IDS,
                        serving.follower().failures());
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
                if (s0 != null) {
                    s0.close();
                }
                followed.close();
            }
        }
    }

    /** One push per row, in batches: row i ends at (i % 1000) + base. */
    private static void pushAll(PsClient trainer, long[] ids, int base) {
        float[] grads = new float[8_192 * DIM];
        for (int from = 0; from < ids.length; from += 8_192) {
            int n = Math.min(8_192, ids.length - from);
            for (int i = 0; i < n; i++) {
                Arrays.fill(grads, i * DIM, (i + 1) * DIM, -((from + i) % 1_000) - base);
            }
            trainer.push("emb", Arrays.copyOfRange(ids, from, from + n), Arrays.copyOf(grads, n * DIM));
        }
    }

    private ChildJvm startTraining(ClusterConfig train, List<ChildJvm> children) {
        return Members.startProcess(train, "t0", "-Xmx384m", List.of(), children);
    }
}
