package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.test.TestingServer;
import org.apache.zookeeper.AddWatchMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.junit.jupiter.api.Test;

/**
 * A member that drained leaves in the order the controller relies on: its member node goes
 * before its drain request. The other way round, a controller reading between the two saw the
 * leaver live and no longer leaving and moved groups to it as it exited (seen in the demo: a move
 * to the closed server, and pushes that waited on its forwards until their deadline). A
 * persistent recursive watch on the cluster's root sees every change in ZooKeeper's order.
 */
class DrainedLeaveTest {

    @Test
    void theMemberNodeGoesBeforeTheDrainRequest() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "drained-leave")
                    .withSessionTimeoutMillis(5_000).withMaxGroupsPerMove(256);
            ClusterPaths paths = new ClusterPaths(config);
            List<String> events = new ArrayList<>();
            try (Members members = new Members(config, "tcp");
                    CuratorFramework watcher = CuratorFrameworkFactory.newClient(zk.getConnectString(),
                            new RetryOneTime(100))) {
                Members.Member a = members.start("a");
                Members.Member b = members.start("b");
                members.awaitBalanced(List.of("a", "b"));
                watcher.start();
                watcher.blockUntilConnected(10, TimeUnit.SECONDS);
                Watcher record = (WatchedEvent e) -> {
                    synchronized (events) {
                        events.add(e.getType() + " " + e.getPath());
                    }
                };
                watcher.watchers().add().withMode(AddWatchMode.PERSISTENT_RECURSIVE).usingWatcher(record)
                        .forPath(paths.root);
                b.membership().drain().get(30, TimeUnit.SECONDS);
                members.stop(b);
                String memberGone = Watcher.Event.EventType.NodeDeleted + " " + paths.member("b");
                String drainGone = Watcher.Event.EventType.NodeDeleted + " " + paths.drain("b");
                Members.await(() -> {
                    synchronized (events) {
                        return events.contains(memberGone) && events.contains(drainGone);
                    }
                }, "b's member node and drain request to go");
                synchronized (events) {
                    assertTrue(events.indexOf(memberGone) < events.indexOf(drainGone), events.toString());
                    assertEquals(1, events.stream().filter(drainGone::equals).count(), events.toString());
                }
                members.awaitBalanced(List.of("a"));
                Assignment last = a.membership().assignment();
                assertNull(last.move(), last.toString());
                assertEquals(0, last.groupCount("b"));
                assertEquals(dev.ferry.ps.net.RoutingTable.GROUPS, last.groupCount("a"));
            }
        }
    }
}
