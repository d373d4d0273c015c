package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

/**
 * {@link ClusterAdmin#watchMoves}: each status a move's source writes reaches the listener with
 * its move id, a failure with its reason, also one deleted right after it was read; stray nodes
 * are passed over; nothing after the handle is closed. Real ZooKeeper; the statuses are written as a move's source writes them.
 */
class WatchMovesTest {

    @Test
    void everyReportedMoveStatusReachesTheListenerUntilClosed() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "watch-moves");
            ClusterPaths paths = new ClusterPaths(config);
            BlockingQueue<String> seen = new LinkedBlockingQueue<>();
            try (ClusterAdmin admin = ClusterAdmin.connect(config);
                    CuratorFramework source = CuratorFrameworkFactory.newClient(zk.getConnectString(),
                            new RetryOneTime(100))) {
                source.start();
                source.blockUntilConnected(10, TimeUnit.SECONDS);
                AutoCloseable watch = admin.watchMoves((id, state) -> seen.add(id + " " + state));
                write(source, paths.move(7), "failed: connection refused by 127.0.0.11:7001");
                assertEquals("7 failed: connection refused by 127.0.0.11:7001", seen.poll(10, TimeUnit.SECONDS));
                source.delete().forPath(paths.move(7)); // the controller's next pass
                write(source, paths.move(8), "ready");
                assertEquals("8 ready", seen.poll(10, TimeUnit.SECONDS));
                write(source, paths.move(8), "failed: the target closed");
                assertEquals("8 failed: the target closed", seen.poll(10, TimeUnit.SECONDS));
                // Stray nodes under the moves node (not a move id, or past a long) are passed over,
                // on the watch and in the status, and do not stop the statuses after them.
                write(source, paths.moves + "/99999999999999999999", "ready");
                write(source, paths.moves + "/notes", "ready");
                write(source, paths.move(10), "ready");
                assertEquals("10 ready", seen.poll(10, TimeUnit.SECONDS));
                assertEquals(java.util.Set.of(8L, 10L), admin.status().moves().keySet());
                watch.close();
                write(source, paths.move(9), "ready");
                assertNull(seen.poll(500, TimeUnit.MILLISECONDS), "nothing once closed");
            }
        }
    }

    /** As a move's source reports: creating the parents, or setting the data of a status already there. */
    private static void write(CuratorFramework zk, String path, String state) throws Exception {
        zk.create().orSetData().creatingParentsIfNeeded().forPath(path, state.getBytes(StandardCharsets.UTF_8));
    }
}
