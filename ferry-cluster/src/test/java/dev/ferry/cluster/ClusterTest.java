package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.test.InstanceSpec;
import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;

/**
 * Servers join and leave a cluster on a real in-process ZooKeeper under a continuous push and
 * pull workload; the one client follows every move, and every row ends equal to the exact sum of
 * the acknowledged pushes.
 */
class ClusterTest {

    static InstanceSpec spec() {
        // tickTime 250 ms: sessions of 0.5 to 5 s are allowed.
        return new InstanceSpec(null, -1, -1, -1, true, -1, 250, -1);
    }

    @Test
    void serversJoinAndLeaveUnderLoad() throws Exception {
        try (TestingServer zk = new TestingServer(spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "join-leave").withSessionTimeoutMillis(5_000)
                    .withMaxGroupsPerMove(256).withReplication(Integer.getInteger("ferry.r", 2), 1);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a");
                Members.Member b = members.start("b");
                members.awaitBalanced(List.of("a", "b"));
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"), "ferry://" + a.address())) {
                    client.createTable(TableConfig.of("t", Workload.DIM, Optimizer.sgd(1)));
                    try (Workload load = new Workload(client, "t", 512, 3)) {
                        load.awaitPushes(100);
                        // CI: one join and one clean leave; -Pfull: several rounds of both.
                        int rounds = "full".equals(System.getProperty("ferry.test.scale")) ? 6 : 1;
                        long drainMillis = 0;
                        Members.Member leaving = b;
                        List<String> staying = List.of("a");
                        for (int round = 0; round < rounds; round++) {
                            Members.Member joined = members.start("c" + round);
                            List<String> all = new java.util.ArrayList<>(staying);
                            all.add(leaving.id());
                            all.add(joined.id());
                            members.awaitBalanced(all);
                            load.awaitPushes(100);
                            long drainStart = System.nanoTime();
                            leaving.membership().drain().get(30, TimeUnit.SECONDS);
                            drainMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - drainStart);
                            members.stop(leaving);
                            all.remove(leaving.id());
                            members.awaitBalanced(all);
                            load.awaitPushes(100);
                            leaving = joined;
                        }
                        Members.Member c = leaving;
                        load.stopAndCheck();
                        System.out.printf("[cluster] join and drain under load: %d pushes, drain of b took %d ms,"
                                + " client retried %d parts, fetched %d tables%n", load.pushes(), drainMillis,
                                client.retries(), client.refreshes());
                        // The last bumps reach the client with its next answers. A balanced table can still
                        // be short of backups (those the leaver held): their copies run on, each a generation
                        // when it starts and one when it flips, so the client asks until it has caught up with
                        // a table with no move in flight.
                        Members.await(() -> {
                            client.pull("t", new long[] {1, 2, 3});
                            Assignment newest = members.newest();
                            return newest.move() == null && client.routingTable().generation() == newest.generation();
                        }, "the client to follow the last generation");
                        assertTrue(c.server().routingTable().groupCount(c.server().index()) > 0);
                    }
                }
            }
        }
    }
}
