package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import dev.ferry.ps.net.RoutingTable;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;

/**
 * A member server process killed with SIGKILL: its member node expires after the session
 * timeout (measured), the controller gives its groups to the others, which restore their rows
 * from the killed server's last checkpoint, and the same client's next push and pull succeed
 * (retried through the failover). The killed server's pushes since its checkpoint are lost (no
 * replicas yet); every other row keeps exactly its acknowledged pushes.
 */
class ClusterKillTest {

    private static final int SESSION_MILLIS = 1_500;
    private static final int KEYS = 256;

    @Test
    void killedServerIsReplacedAndTheClientRecovers(@org.junit.jupiter.api.io.TempDir java.nio.file.Path checkpoints)
            throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "kill")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withMaxGroupsPerMove(1024).withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            List<String> addresses = new ArrayList<>();
            try (ClusterAdmin admin = ClusterAdmin.connect(config)) {
                for (int i = 0; i < 3; i++) {
                    ClusterServerMain.Options o = new ClusterServerMain.Options(config, "s" + i, 0, "127.0.0.1", "tcp",
                            checkpoints, true, false);
                    ProcessBuilder builder = new ProcessBuilder(ChildJvm.javaCommand(
                            List.of("-Xmx256m", "-XX:+UseSerialGC"), ClusterServerMain.class.getName(), o.toArgs()));
                    builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
                    builder.environment().put(SharedSecret.ENV_SECRET, Members.SECRET);
                    ChildJvm child = ChildJvm.start(builder, "s" + i);
                    children.add(child);
                }
                for (ChildJvm child : children) {
                    addresses.add(child.expect(PsServerMain.LISTENING, 60_000).split(" ")[1]);
                    child.expect(ClusterServerMain.JOINED, 60_000);
                }
                Members.await(() -> balanced(admin.status(), 3), "three balanced members");
                RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(3_000);
                TransportConfig transport = Members.transport("tcp");
                try (PsClient client = PsClient.connect(rpc, transport, "ferry://" + addresses.get(0))) {
                    client.createTable(TableConfig.of("t", 1, Optimizer.sgd(1)));
                    long[] ids = new long[KEYS];
                    for (int i = 0; i < KEYS; i++) {
                        ids[i] = i;
                    }
                    float[] grads = new float[KEYS];
                    for (int round = 1; round <= 3; round++) {
                        java.util.Arrays.fill(grads, -round);
                        client.push("t", ids, grads); // rows: 1 + 2 + 3 = 6
                    }
                    assertEquals(3, client.checkpoint().size());
                    java.util.Arrays.fill(grads, -4);
                    client.push("t", ids, grads); // 10, but lost on the killed server: not checkpointed
                    RoutingTable before = client.routingTable();
                    int victim = before.indexOf("s1");
                    children.get(1).kill();
                    long killed = System.nanoTime();
                    assertTrue(admin.awaitGone("s1", 30_000), "s1's member node expired");
                    long expiredMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
                    java.util.Arrays.fill(grads, -10);
                    client.push("t", ids, grads); // retried until the new owners answer
                    long recoveredMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
                    float[] rows = client.pull("t", ids);
                    int moved = 0;
                    for (int i = 0; i < KEYS; i++) {
                        boolean lost = before.slots().serverOf(ids[i]) == victim;
                        moved += lost ? 1 : 0;
                        // The killed server's rows: the checkpoint's 6, then 10; the others 6 + 4 + 10.
                        assertEquals(lost ? 16f : 20f, rows[i], "id " + i + (lost ? " (on the killed server)" : ""));
                    }
                    assertTrue(moved > 0);
                    Members.await(() -> balanced(admin.status(), 2), "two balanced members");
                    assertFalse(admin.status().members().containsKey("s1"));
                    System.out.printf("[cluster] SIGKILL with a %d ms session: member node gone after %d ms, first push"
                            + " on its groups acknowledged %d ms after the kill (%d of %d ids restored from its checkpoint),"
                            + " %d retries%n",
                            SESSION_MILLIS, expiredMillis, recoveredMillis, moved, KEYS, client.retries());
                }
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
            }
        }
    }

    static boolean balanced(ClusterAdmin.Status s, int n) {
        return ClusterLauncher.balanced(s, n);
    }
}
