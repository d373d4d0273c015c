package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;

/**
 * A serving server process ({@code ClusterServerMain --serving --follow}, a child JVM) killed
 * with SIGKILL while a training member takes SGD pushes (unique integer gradients), then started
 * again with the same id. The other serving member (in this JVM) takes the dead one's groups
 * empty and resyncs them; the restarted one gets groups back by a move, empty, and resyncs too;
 * once training stops every row the serving cluster serves equals training's. Nothing is lost.
 */
class ExportKillTest {

    private static final int DIM = 4;
    private static final int IDS = 1_024;
    private static final int SESSION_MILLIS = 1_500;

    @Test
    void aKilledServingServerCatchesUpAfterItsRestart() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train").withReplication(1, 1);
            ClusterConfig serve = ClusterConfig.of(zk.getConnectString(), "serve")
                    .withSessionTimeoutMillis(SESSION_MILLIS).withReplication(1, 1);
            List<ChildJvm> children = new ArrayList<>();
            ExportClusterTest.Node t0 = ExportClusterTest.training(train, "t0");
            // An in-process serving member first (the serving cluster's controller), then the process.
            FollowedCluster followed = FollowedCluster.of(train.uri(), "tcp");
            ExportClusterTest.Node s0 = ExportClusterTest.serving(serve, "s0", followed);
            try (ClusterAdmin admin = ClusterAdmin.connect(serve)) {
                ChildJvm first = startServing(serve, train, children);
                String address = first.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                first.expect(ClusterServerMain.JOINED, 60_000);
                RpcConfig rpc = Members.rpc().withDefaultDeadlineMillis(3_000);
                try (PsClient trainer = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + t0.address())) {
                    trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                    long[] ids = new long[IDS];
                    for (int i = 0; i < IDS; i++) {
                        ids[i] = i;
                    }
                    AtomicBoolean stop = new AtomicBoolean();
                    AtomicInteger pushes = new AtomicInteger();
                    AtomicReference<Throwable> failed = new AtomicReference<>();
                    Thread pusher = Thread.ofPlatform().start(() -> {
                        long[] batch = new long[32];
                        float[] grads = new float[32 * DIM];
                        int k = 1;
                        while (!stop.get()) {
                            int base = (k * 32) % IDS;
                            for (int i = 0; i < 32; i++) {
                                batch[i] = base + i;
                                Arrays.fill(grads, i * DIM, (i + 1) * DIM, k++ % 4093 + 1);
                            }
                            try {
                                trainer.push("emb", batch, grads);
                                pushes.incrementAndGet();
                            } catch (RuntimeException e) {
                                failed.set(e);
                                return;
                            }
                        }
                    });
                    try {
                        try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"), "ferry://" + address)) {
                            Members.await60(() -> pushes.get() > 200 && servedRows(reader, ids) > 0,
                                    "serving rows before the kill");
                        }
                        first.kill();
                        long killed = System.nanoTime();
                        assertTrue(admin.awaitGone("sv", 30_000), "the killed member's node expired");
                        int before = pushes.get();
                        ChildJvm second = startServing(serve, train, children);
                        String again = second.expect(PsServerMain.LISTENING, 60_000).split(" ")[1];
                        second.expect(ClusterServerMain.JOINED, 60_000);
                        Members.await60(() -> pushes.get() > before + 200, "pushes after the restart");
                        stop.set(true);
                        pusher.join();
                        assertTrue(failed.get() == null, () -> "a push failed: " + failed.get());
                        float[] expected = trainer.pull("emb", ids);
                        long stopped = System.nanoTime();
                        try (PsClient reader = PsClient.connect(rpc, Members.transport("tcp"),
                                "ferry://" + s0.address() + "," + again)) {
                            String[] last = {"nothing pulled"};
                            try {
                                Members.await60(() -> {
                                    try {
                                        float[] got = reader.pull("emb", ids);
                                        for (int i = 0; i < got.length; i++) {
                                            if (got[i] != expected[i]) {
                                                last[0] = "id " + i / DIM + ": " + got[i] + " != " + expected[i];
                                                return false;
                                            }
                                        }
                                        return true;
                                    } catch (RuntimeException notYet) {
                                        last[0] = notYet.toString();
                                        return false;
                                    }
                                }, "the restarted serving server equal to training");
                            } catch (AssertionError e) {
                                throw new AssertionError(e.getMessage() + "; last: " + last[0], e);
                            }
                        }
                        System.out.printf("[export-kill] serving server SIGKILLed after %d pushes, restarted; equal to"
                                + " training %d ms after training stopped (%d ms after the kill), %d pushes in all%n",
                                before, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped),
                                TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed), pushes.get());
                    } finally {
                        stop.set(true);
                        pusher.join();
                    }
                }
            } finally {
                for (ChildJvm child : children) {
                    child.close();
                }
                s0.close();
                followed.close();
                t0.close();
            }
        }
    }

    private static ChildJvm startServing(ClusterConfig serve, ClusterConfig train, List<ChildJvm> children) {
        ClusterServerMain.Options o = new ClusterServerMain.Options(serve, "sv", 0, "127.0.0.1", "tcp", null, true,
                false);
        List<String> args = new ArrayList<>(o.toArgs());
        args.addAll(ExportOptions.following(train.uri(), 200).toArgs());
        ProcessBuilder builder = new ProcessBuilder(ChildJvm.javaCommand(List.of("-Xmx256m", "-XX:+UseSerialGC"),
                ClusterServerMain.class.getName(), args));
        builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
        builder.environment().put(SharedSecret.ENV_SECRET, Members.SECRET);
        ChildJvm child = ChildJvm.start(builder, "sv");
        children.add(child);
        return child;
    }

    /** Rows {@code reader}'s serving server returns other than the initial zeros, or 0 if it cannot answer yet. */
    private static int servedRows(PsClient reader, long[] ids) {
        try {
            float[] rows = reader.pull("emb", ids);
            int n = 0;
            for (int i = 0; i < ids.length; i++) {
                n += rows[i * DIM] != 0 ? 1 : 0;
            }
            return n;
        } catch (RuntimeException notYet) {
            return 0;
        }
    }
}
