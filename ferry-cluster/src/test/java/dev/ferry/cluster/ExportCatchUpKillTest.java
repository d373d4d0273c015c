package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.ExportService;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServer;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;

/**
 * A serving server process ({@code ClusterServerMain --serving --follow}, a child JVM) SIGKILLed
 * while training takes SGD pushes on a hot set of rows, then started again with the same id: it
 * catches up from the training server's latest checkpoint plus the later deltas, never from a
 * full resync (its counters, read through {@link ExportStatus}, say so), and once training stops
 * every row the serving cluster serves equals training's.
 */
class ExportCatchUpKillTest {

    private static final int DIM = 4;
    private static final int IDS = 8_192;
    private static final int HOT = 64;
    private static final int SESSION_MILLIS = 1_500;

    @TempDir
    Path root;

    @Test
    void aKilledServingProcessCatchesUpFromTheCheckpointPlusLaterDeltas() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train").withReplication(1, 1);
            ClusterConfig serve = ClusterConfig.of(zk.getConnectString(), "serve")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            ExportClusterTest.Node t0 = training(train, "t0");
            FollowedCluster followed = FollowedCluster.of(train.uri(), "tcp");
            ExportClusterTest.Node s0 = null;
            RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(3_000);
            ExportClusterTest.awaitOwning(List.of(t0));
            try (PsClient trainer = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + t0.address());
                    ClusterAdmin admin = ClusterAdmin.connect(serve)) {
                Members.await60(() -> {
                    try {
                        trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                        return true;
                    } catch (RuntimeException noRoutingTableYet) {
                        return false;
                    }
                }, "the training member's routing table");
                long[] ids = new long[IDS];
                for (int i = 0; i < IDS; i++) {
                    ids[i] = i;
                }
                float[] ones = new float[IDS * DIM];
                Arrays.fill(ones, 1f);
                Members.await60(() -> {
                    try {
                        trainer.push("emb", ids, ones);
                        return true;
                    } catch (dev.ferry.ps.PsException noRoutingTableYet) {
                        return false; // refused whole: nothing applied
                    }
                }, "the first push");
                assertEquals(1, trainer.checkpoint().size());
                s0 = ExportClusterTest.serving(serve, "s0", followed);
                ChildJvm first = ServingProcesses.startServing(serve, train, children);
                String firstAddress = first.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                first.expect(ClusterServerMain.JOINED, 60_000);
                try (ServingProcesses.Trainer pushes = new ServingProcesses.Trainer(trainer, HOT, DIM)) {
                    Members.await60(() -> pushes.pushes() > 200 && status(first, "checkpointRows") > 0,
                            "the first serving process caught up from the checkpoint");
                    try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + firstAddress)) {
                        reader.pull("emb", ids); // it serves
                    }
                    assertTrue(trainer.checkpoint().size() == 1, "a later checkpoint, mid-stream");
                    first.kill();
                    long killed = System.nanoTime();
                    assertTrue(admin.awaitGone("sv", 30_000), "the killed member's node expired");
                    int before = pushes.pushes();
                    ChildJvm second = ServingProcesses.startServing(serve, train, children);
                    String again = second.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                    second.expect(ClusterServerMain.JOINED, 60_000);
                    // Once it holds groups again (moved back to it) it has caught up with their rows.
                    Members.await60(() -> pushes.pushes() > before + 200 && status(second, "checkpointRows") > 0,
                            "pushes after the restart and its catch-up");
                    pushes.stop();
                    float[] expected = trainer.pull("emb", ids);
                    long stopped = System.nanoTime();
                    ServingProcesses.awaitEqual(rpc, "ferry://" + s0.address() + "," + again, ids, expected, DIM);
                    long equalMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped);
                    String line = statusLine(second);
                    long loads = ExportStatus.value(line, "checkpointLoads");
                    long fromCheckpoint = ExportStatus.value(line, "checkpointRows");
                    long deltas = ExportStatus.value(line, "applied") + ExportStatus.value(line, "older");
                    assertTrue(loads >= 1 && fromCheckpoint > 0, line);
                    assertEquals(0, ExportStatus.value(line, "resyncs"), line);
                    assertEquals(0, ExportStatus.value(line, "checkpointFallbacks"), line);
                    assertTrue(deltas < fromCheckpoint, "rows pulled as deltas (" + deltas
                            + ") fewer than those loaded from the checkpoint: " + line);
                    assertEquals(0, s0.follower().resyncs(), "the in-process member never resynced either: "
                            + s0.follower().lastFallback());
                    System.out.printf("[export-catchup-kill] serving process SIGKILLed after %d pushes and restarted:"
                            + " %d checkpoint loads, %d rows from checkpoints, %d rows as deltas, 0 resyncs; equal to"
                            + " training %d ms after training stopped (%d ms after the kill)%n", before, loads,
                            fromCheckpoint, deltas, equalMillis,
                            TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed));
                }
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
                if (s0 != null) {
                    s0.close();
                }
                followed.close();
                t0.close();
            }
        }
    }

    private ExportClusterTest.Node training(ClusterConfig config, String id) {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, id, root.resolve(id), Members.rpc(), false);
        ExportService export = ExportService.attach(server);
        String address = server.listen(Members.transport("tcp"));
        ClusterMember m = ClusterMember.join(config, new MemberInfo(id, System.nanoTime(), "localhost",
                Map.of("tcp", address), 1 << 20), server, root);
        return new ExportClusterTest.Node(id, ps, server, address, m, export, null);
    }

    private static String statusLine(ChildJvm child) {
        child.send(ExportStatus.COMMAND);
        return child.expect(ExportStatus.COMMAND, 10_000);
    }

    private static long status(ChildJvm child, String key) {
        return ExportStatus.value(statusLine(child), key);
    }
}
