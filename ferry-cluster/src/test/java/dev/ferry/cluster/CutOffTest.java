package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;

/**
 * A member cut off from ZooKeeper but not from its clients (the fault: the ZooKeeper server is
 * stopped, the members' sessions live on, their connections are gone), with a cut-off grace
 * period: it acknowledges no push from the moment its connection is suspended, refuses pulls
 * once the grace is over, and serves again when the connection is back. Rows keep exactly the
 * acknowledged pushes.
 */
class CutOffTest {

    @Test
    void aCutOffMemberAcknowledgesNothingAndStopsReadsAfterItsGrace() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "cut-off").withSessionTimeoutMillis(5_000)
                    .withMaxGroupsPerMove(1024).withCutOffGraceMillis(300);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a");
                Members.Member b = members.start("b");
                members.awaitBalanced(List.of("a", "b"));
                Members.await(() -> {
                    Assignment n = members.newest();
                    for (int g = 0; g < dev.ferry.ps.net.RoutingTable.GROUPS; g++) {
                        if (n.backupsOf(g).size() != 1) {
                            return false;
                        }
                    }
                    return true;
                }, "two copies of every group");
                String bootstrap = "ferry://" + a.address() + "," + b.address();
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"), bootstrap)) {
                    client.createTable(TableConfig.of("t", 1, Optimizer.sgd(1)));
                    long[] ids = new long[64];
                    for (int i = 0; i < ids.length; i++) {
                        ids[i] = i;
                    }
                    float[] ones = new float[ids.length];
                    java.util.Arrays.fill(ones, -1);
                    members.awaitBalanced(List.of("a", "b"));
                    client.push("t", ids, ones);
                    client.retryPolicy(1, 1);

                    zk.stop();
                    Members.await(() -> !a.server().gate().pushesOpen() && !b.server().gate().pushesOpen(),
                            "both members to stop acknowledging");
                    PsException refused = assertThrows(PsException.class, () -> client.push("t", ids, ones));
                    assertEquals(PsException.Code.WRONG_SERVER, refused.code(), refused.toString());
                    Members.await(() -> !a.server().gate().readsOpen() && !b.server().gate().readsOpen(),
                            "both members to stop serving pulls after the grace");
                    PsException stale = assertThrows(PsException.class, () -> client.pull("t", ids));
                    assertEquals(PsException.Code.WRONG_SERVER, stale.code(), stale.toString());

                    zk.restart();
                    Members.await(() -> a.server().gate().pushesOpen() && b.server().gate().pushesOpen(),
                            "both members to serve again");
                    client.retryPolicy(PsClient.DEFAULT_ATTEMPTS, PsClient.DEFAULT_MAX_BACKOFF_MILLIS);
                    client.push("t", ids, ones);
                    float[] rows = client.pull("t", ids);
                    for (int i = 0; i < ids.length; i++) {
                        assertEquals(2f, rows[i], "id " + i + ": the two acknowledged pushes, not the refused one");
                    }
                }
            }
        }
    }
}
