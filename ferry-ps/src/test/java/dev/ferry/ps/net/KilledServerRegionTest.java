package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An shm server killed with SIGKILL leaves its 16 MiB region and its doorbell in {@code /dev/shm};
 * the next process that starts an shm transport removes both, and the live ones stay.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class KilledServerRegionTest {

    @Test
    void theNextShmTransportRemovesWhatAKilledServerLeft() {
        try (LocalCluster cluster = LocalCluster.start(1, "shm", null, List.of("-Xmx128m", "-XX:TieredStopAtLevel=1"))) {
            long killed = cluster.pid(0);
            try (PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                client.createTable(TableConfig.of("t", 4, Optimizer.sgd(0.1)));
            }
            Set<String> region = ShmLoadTest.regionsOf(killed);
            assertEquals(1, region.size(), "the server's region: " + ShmLoadTest.filesOf(killed));
            cluster.kill(0);
            assertFalse(cluster.isAlive(0));
            assertEquals(region, ShmLoadTest.regionsOf(killed), "SIGKILL runs no clean-up: the region stays for now");
            // A new server process: its shm transport clears what the dead one left.
            cluster.restartStopped(i -> false);
            long restarted = cluster.pid(0);
            assertNotEquals(killed, restarted);
            assertEquals(Set.of(), ShmLoadTest.filesOf(killed), "left by the killed server after a new transport started");
            assertEquals(1, ShmLoadTest.regionsOf(restarted).size(), "the new server's region");
            try (PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                assertTrue(client.describeServers().getFirst().tables().isEmpty());
            }
            assertEquals(1, ShmLoadTest.regionsOf(restarted).size(), "a client's new transport left the live region alone");
        }
    }
}
