package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;

/**
 * A serving server process ({@code ClusterServerMain --serving --follow}, a child JVM) killed
 * with SIGKILL while a training member takes SGD pushes (unique integer gradients), then started
 * again with the same id. The other serving member (in this JVM) takes the dead one's groups
 * empty and resyncs them; the restarted one gets groups back by a move, empty, and resyncs too;
 * once training stops every row the serving cluster serves equals training's. Nothing is lost.
 */
class ExportKillTest {

    private static final int DIM = 4;
    private static final int IDS = 1_024;
    private static final int SESSION_MILLIS = 1_500;

    @Test
    void aKilledServingServerCatchesUpAfterItsRestart() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train").withReplication(1, 1);
            ClusterConfig serve = ClusterConfig.of(zk.getConnectString(), "serve")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            ExportClusterTest.Node t0 = ExportClusterTest.training(train, "t0");
            // An in-process serving member first (the serving cluster's controller), then the process.
            FollowedCluster followed = FollowedCluster.of(train.uri(), "tcp");
            ExportClusterTest.Node s0 = ExportClusterTest.serving(serve, "s0", followed);
            try (ClusterAdmin admin = ClusterAdmin.connect(serve)) {
                ChildJvm first = ServingProcesses.startServing(serve, train, children);
                String address = first.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                first.expect(ClusterServerMain.JOINED, 60_000);
                RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(3_000);
                try (PsClient trainer = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + t0.address())) {
                    trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                    long[] ids = new long[IDS];
                    for (int i = 0; i < IDS; i++) {
                        ids[i] = i;
                    }
                    try (ServingProcesses.Trainer pushes = new ServingProcesses.Trainer(trainer, IDS, DIM)) {
                        try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + address)) {
                            Members.await60(() -> pushes.pushes() > 200 && servedRows(reader, ids) > 0,
                                    "serving rows before the kill");
                        }
                        first.kill();
                        long killed = System.nanoTime();
                        assertTrue(admin.awaitGone("sv", 30_000), "the killed member's node expired");
                        int before = pushes.pushes();
                        ChildJvm second = ServingProcesses.startServing(serve, train, children);
                        String again = second.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                        second.expect(ClusterServerMain.JOINED, 60_000);
                        Members.await60(() -> pushes.pushes() > before + 200, "pushes after the restart");
                        pushes.stop();
                        float[] expected = trainer.pull("emb", ids);
                        long stopped = System.nanoTime();
                        ServingProcesses.awaitEqual(rpc, "ferry://" + s0.address() + "," + again, ids, expected, DIM);
                        System.out.printf("[export-kill] serving server SIGKILLed after %d pushes, restarted; equal to"
                                + " training %d ms after training stopped (%d ms after the kill), %d pushes in all%n",
                                before, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped),
                                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed), pushes.pushes());
                    }
                }
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
                s0.close();
                followed.close();
                t0.close();
            }
        }
    }

    /** Rows {@code reader}'s serving server returns other than the initial zeros, or 0 if it cannot answer yet. */
    private static int servedRows(PsClient reader, long[] ids) {
        try {
            float[] rows = reader.pull("emb", ids);
            int n = 0;
            for (int i = 0; i < ids.length; i++) {
                n += rows[i * DIM] != 0 ? 1 : 0;
            }
            return n;
        } catch (RuntimeException notYet) {
            return 0;
        }
    }
}
