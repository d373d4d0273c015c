package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsDescriptor;

/**
 * One copy per group (r = 1): a member that leaves without draining (its member node gone, no
 * moves) has its groups restarted on the survivor from its newest checkpoint. Its dense tensors
 * come back from that checkpoint too, with their optimizer state and steps, exactly as
 * checkpointed (the pushes since are lost with r = 1); before, the survivor skipped them and
 * answered {@code UNKNOWN_TABLE}. In-process members on a real in-process ZooKeeper.
 */
class DenseRestoreTest {

    private static final int TENSORS = 16;

    @Test
    void aDeadOwnersDenseTensorsComeBackFromItsCheckpoint(@TempDir Path root) throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "restore").withSessionTimeoutMillis(5_000)
                    .withMaxGroupsPerMove(512).withReplication(1, 1);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a", root);
                members.start("b", root);
                members.awaitBalanced(List.of("a", "b"));
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"),
                        "ferry://" + a.address())) {
                    boolean[] onA = new boolean[TENSORS];
                    int owned = 0;
                    for (int t = 0; t < TENSORS; t++) {
                        client.createDense(new DenseConfig("d" + t, 2, Optimizer.adagrad(1), Initializer.zeros()));
                        client.pushDense("d" + t, new float[] {-(t + 1), -(t + 1)});
                        onA[t] = a.server().routingTable().slots().serverOf(PsDescriptor.denseKey("d" + t))
                                == a.server().index();
                        owned += onA[t] ? 1 : 0;
                    }
                    assertTrue(owned > 0 && owned < TENSORS, "a owns some of the tensors, not all: " + owned);
                    float[][] checkpointed = new float[TENSORS][];
                    for (int t = 0; t < TENSORS; t++) {
                        checkpointed[t] = client.pullDense("d" + t);
                    }
                    client.checkpoint();
                    for (int t = 0; t < TENSORS; t++) {
                        client.pushDense("d" + t, new float[] {-100, -100}); // after the checkpoint
                    }
                    float[][] latest = new float[TENSORS][];
                    for (int t = 0; t < TENSORS; t++) {
                        latest[t] = client.pullDense("d" + t);
                    }

                    members.stop(a); // no drain: its groups restart on b from a's checkpoint
                    members.awaitBalanced(List.of("b"));
                    for (int t = 0; t < TENSORS; t++) {
                        float[] w = client.pullDense("d" + t);
                        assertArrayEquals(onA[t] ? checkpointed[t] : latest[t], w, "d" + t
                                + (onA[t] ? ": a's, as checkpointed" : ": b's own, as last pushed"));
                    }
                    // The restored tensors keep their optimizer state: the next step is AdaGrad's second.
                    for (int t = 0; t < TENSORS; t++) {
                        client.pushDense("d" + t, new float[] {-1, -1});
                    }
                    assertTrue(client.pullDense("d0")[0] > checkpointed[0][0] || !onA[0], "d0 stepped again");
                }
            }
        }
    }
}
