package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.test.InstanceSpec;
import org.apache.curator.test.TestingCluster;
import org.apache.curator.test.TestingZooKeeperServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;

/**
 * A cluster on a 3-node ZooKeeper ensemble under a continuous push and pull workload: losing one
 * ZooKeeper node changes nothing (a server still joins); losing two stops reconfiguration (the
 * generation stays) but not serving; with a quorum back, a clean leave completes. Every row ends
 * equal to the exact sum of the acknowledged pushes.
 */
class QuorumTest {

    @Test
    void servingOutlivesTheQuorumAndReconfigurationNeedsIt() throws Exception {
        List<InstanceSpec> specs = new ArrayList<>();
        for (int i = 1; i <= 3; i++) {
            specs.add(new InstanceSpec(null, -1, -1, -1, true, i, 500, -1));
        }
        try (TestingCluster zk = new TestingCluster(specs)) {
            zk.start();
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "quorum").withSessionTimeoutMillis(8_000)
                    .withMaxGroupsPerMove(512);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a");
                members.start("b");
                members.awaitBalanced(List.of("a", "b"));
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"), "ferry://" + a.address())) {
                    client.createTable(TableConfig.of("t", Workload.DIM, Optimizer.sgd(1)));
                    try (Workload load = new Workload(client, "t", 256, 2)) {
                        load.awaitPushes(50);
                        List<TestingZooKeeperServer> servers = zk.getServers();
                        servers.get(0).kill();
                        Members.Member c = members.start("c");
                        members.awaitBalanced(List.of("a", "b", "c"));
                        load.awaitPushes(50);

                        servers.get(1).kill();
                        long generation = members.newest().generation();
                        long pushesBefore = load.pushes();
                        load.awaitPushes(100);
                        TimeUnit.MILLISECONDS.sleep(500);
                        assertEquals(generation, members.newest().generation(), "no reconfiguration without a quorum");
                        System.out.printf("[cluster] without a ZooKeeper quorum: %d pushes acknowledged, generation"
                                + " stayed %d%n", load.pushes() - pushesBefore, generation);

                        servers.get(1).restart();
                        c.membership().drain().get(60, TimeUnit.SECONDS);
                        members.stop(c);
                        members.awaitBalanced(List.of("a", "b"));
                        load.awaitPushes(50);
                        load.stopAndCheck();
                    }
                }
            }
        }
    }
}
