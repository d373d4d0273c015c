package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Servers in child processes: checkpoint, crash (SIGKILL), restart from the checkpoint, serve read-only. */
@Timeout(value = 80, unit = TimeUnit.SECONDS)
class PsProcessTest {

    private static final List<String> JVM = List.of("-Xmx256m", "-XX:TieredStopAtLevel=1");

    @Test
    void checkpointKillRestartGivesBitIdenticalRows(@TempDir Path dir) {
        String provider = System.getProperty("ferry.ps.process.provider", "shm");
        long[] ids = new long[2_000];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 7919L;
        }
        float[] checkpointed;
        long[] children = new long[2];
        try (LocalCluster cluster = LocalCluster.start(2, provider, dir, JVM)) {
            long pid = cluster.pid(0);
            float[] pulled;
            try (PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                client.createTable(TableConfig.of("emb", 16, Optimizer.adam(0.01))
                        .withInitializer(Initializer.normal(0, 0.05, 9)));
                SplittableRandom random = new SplittableRandom(1);
                for (int round = 0; round < 5; round++) {
                    float[] grads = new float[ids.length * 16];
                    for (int i = 0; i < grads.length; i++) {
                        grads[i] = (float) random.nextGaussian();
                    }
                    client.push("emb", ids, grads);
                }
                List<String> written = client.checkpoint();
                assertEquals(2, written.size());
                for (String w : written) {
                    assertTrue(Files.isDirectory(Path.of(w)), w);
                }
                checkpointed = client.pull("emb", ids);
                // Pushed after the checkpoint: lost in the crash.
                client.push("emb", ids, new float[ids.length * 16]);
                pulled = client.pull("emb", ids);
                assertNotEquals(Float.floatToRawIntBits(checkpointed[0]), Float.floatToRawIntBits(pulled[0]));
            }
            cluster.kill(0);
            cluster.kill(1);
            assertFalse(cluster.isAlive(0));
            assertFalse(cluster.isAlive(1));
            // Server 0 restored for training, server 1 serving the same checkpoint read-only.
            cluster.restartStopped(server -> server == 1);
            assertNotEquals(pid, cluster.pid(0));
            try (PsClient client = PsClient.connect(cluster.rpcConfig(), cluster.clientTransport(), cluster.addresses())) {
                float[] restored = client.pull("emb", ids);
                for (int i = 0; i < restored.length; i++) {
                    assertEquals(Float.floatToRawIntBits(checkpointed[i]), Float.floatToRawIntBits(restored[i]),
                            "element " + i);
                }
                PsException e = PsNetTestBase.expect(PsException.Code.READ_ONLY,
                        () -> client.push("emb", ids, new float[ids.length * 16]));
                assertTrue(e.getMessage().contains("server " + cluster.addresses().get(1)), e.getMessage());
            }
            children[0] = cluster.pid(0);
            children[1] = cluster.pid(1);
        }
        for (long pid : children) {
            assertTrue(ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true), "server " + pid + " still runs");
        }
    }
}
