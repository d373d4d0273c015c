package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.util.ArrayList;
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
 * The only member of a cluster SIGKILLed and started again under the same id, on another port,
 * before ZooKeeper expired the dead process's session (8 s here). The restarted member first
 * installs the assignment it finds, which still names the dead address; a client that connects
 * then is routed there, and its table calls fail unreached. Each such failure makes the client ask
 * every server for a newer table, so once the controller (the restarted member, after the old
 * session expired) writes the new address, the client's next try creates, pushes and pulls.
 * Without that refresh the client failed the same way for good.
 */
class SoleMemberRestartTest {

    private static final int DIM = 4;
    private static final int SESSION_MILLIS = 8_000;

    @Test
    void theOnlyMemberRestartedUnderItsIdServesAgain() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(5_000);
            try {
                ChildJvm first = start(train, children);
                String address = first.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                first.expect(ClusterServerMain.JOINED, 60_000);
                try (PsClient trainer = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + address)) {
                    trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                    trainer.push("emb", new long[] {1, 2}, new float[] {-1, -1, -1, -1, -2, -2, -2, -2});
                }
                first.kill();
                long killed = System.nanoTime();
                ChildJvm second = start(train, children);
                String again = second.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                second.expect(ClusterServerMain.JOINED, 60_000);
                try (PsClient client = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + again)) {
                    String[] last = {"nothing tried"};
                    try {
                        Members.await60(() -> {
                            try {
                                client.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                            } catch (RuntimeException e) {
                                if (!e.getMessage().contains("exists")) { // the member re-creates it from ZooKeeper
                                    last[0] = e.toString();
                                    return false;
                                }
                            }
                            try {
                                client.push("emb", new long[] {3}, new float[] {-3, -3, -3, -3});
                                return true;
                            } catch (RuntimeException notYet) {
                                last[0] = notYet.toString();
                                return false;
                            }
                        }, "the restarted member serving");
                    } catch (AssertionError e) {
                        throw new AssertionError(e.getMessage() + "; last: " + last[0], e);
                    }
                    System.out.printf("[sole-restart] serving again %d ms after the kill%n",
                            (System.nanoTime() - killed) / 1_000_000);
                    assertArrayEquals(new float[] {3, 3, 3, 3}, client.pull("emb", new long[] {3}));
                }
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
            }
        }
    }

    private static ChildJvm start(ClusterConfig train, List<ChildJvm> children) {
        return Members.startProcess(train, "t0", "-Xmx256m", List.of(), children);
    }
}
