package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.DeltaFollower;
import dev.ferry.ps.net.ExportService;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServer;

/**
 * The live export on a real in-process ZooKeeper and the tcp transport: a serving cluster of two
 * read-only members follows a training cluster of two, every 200 ms. Two threads push SGD steps
 * (learning rate 1, a unique integer gradient per push, the same in every element of a row) while
 * a reader pulls from the serving cluster. One serving member is closed mid-stream (its tables
 * gone) and restarted empty; after training stops, every row on serving equals training's, and
 * no pull ever saw a torn row (elements of one row from two versions). Then a training server
 * stops answering: serving keeps its values and reports a growing lag.
 */
class ExportClusterTest {

    private static final int DIM = 8;
    private static final int IDS = 2_048;
    private static final long INTERVAL = 200;

    /** One in-process member: training (with its export) or serving (with its follower). */
    record Node(String id, ParameterServer ps, PsServer server, String address, ClusterMember membership,
            ExportService export, DeltaFollower follower) {
        void close() {
            if (follower != null) {
                follower.close();
            }
            membership.close();
            server.close();
            ps.close();
        }
    }

    static Node training(ClusterConfig config, String id) {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, id, null, Members.rpc(), false);
        ExportService export = ExportService.attach(server);
        String address = server.listen(Members.transport("tcp"));
        ClusterMember m = ClusterMember.join(config, info(id, address), server);
        return new Node(id, ps, server, address, m, export, null);
    }

    static Node serving(ClusterConfig config, String id, Supplier<List<String>> sources) {
        ParameterServer ps = ParameterServer.follower(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, id, null, Members.rpc(), false);
        String address = server.listen(Members.transport("tcp"));
        ClusterMember m = ClusterMember.join(config, info(id, address), server);
        DeltaFollower f = DeltaFollower.start(server, sources, Members.rpc(), Members.transport("tcp"), INTERVAL);
        return new Node(id, ps, server, address, m, null, f);
    }

    private static MemberInfo info(String id, String address) {
        return new MemberInfo(id, System.nanoTime(), "localhost", Map.of("tcp", address), 1 << 20);
    }

    @Test
    void aServingClusterFollowsTrainingThroughARestartWithoutTornRows() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig train = ClusterConfig.of(zk.getConnectString(), "train").withSessionTimeoutMillis(5_000)
                    .withReplication(1, 1).withMaxGroupsPerMove(512);
            ClusterConfig serve = ClusterConfig.of(zk.getConnectString(), "serve").withSessionTimeoutMillis(5_000)
                    .withReplication(1, 1).withMaxGroupsPerMove(512);
            List<Node> nodes = new ArrayList<>();
            try (FollowedCluster followed = FollowedCluster.of(train.uri(), "tcp")) {
                Node t0 = training(train, "t0");
                nodes.add(t0);
                Node t1 = training(train, "t1");
                nodes.add(t1);
                Node s0 = serving(serve, "s0", followed);
                nodes.add(s0);
                Node s1 = serving(serve, "s1", followed);
                nodes.add(s1);
                awaitOwning(List.of(t0, t1));
                awaitOwning(List.of(s0, s1));
                try (PsClient trainer = PsClient.connect(Members.rpc(), Members.transport("tcp"),
                        "ferry://" + t0.address() + "," + t1.address());
                        PsClient reader = PsClient.connect(Members.rpc(), Members.transport("tcp"),
                                "ferry://" + s0.address() + "," + s1.address())) {
                    trainer.createTable(TableConfig.of("emb", DIM, Optimizer.sgd(1)));
                    Load load = new Load(trainer, reader);
                    load.start();
                    load.awaitPushes(300);
                    Members.await(() -> s0.follower().rowsApplied() > 0 && s1.follower().rowsApplied() > 0,
                            "both serving members applying deltas");
                    // s1 dies with its rows (its session closed, as after an expiry), then comes back empty.
                    nodes.remove(s1);
                    s1.close();
                    load.awaitPushes(300);
                    Node s1b = serving(serve, "s1", followed);
                    nodes.add(s1b);
                    awaitOwning(List.of(s0, s1b));
                    load.awaitPushes(300);
                    load.stopPushes();
                    long stopped = System.nanoTime();
                    float[] onTraining = checkTraining(trainer, load);
                    // On the serving members' own tables first (no client routing in the way), then through a client.
                    awaitOrSay(() -> servingHolds(List.of(s0, s1b), onTraining), () -> "serving members' tables equal"
                            + " to training's");
                    long tookMs = (System.nanoTime() - stopped) / 1_000_000;
                    awaitEqual(reader, onTraining);
                    load.stopReads();
                    assertTrue(load.reads.get() > 0, "the reader pulled during the deltas");
                    assertEquals(0, load.torn.get(), "torn rows seen by serving pulls");
                    assertTrue(load.failures.isEmpty(), () -> "push failures: " + load.failures);
                    long exported = t0.export().rowsExported() + t1.export().rowsExported();
                    long bytes = t0.export().bytesExported() + t1.export().bytesExported();
                    System.out.printf("[export] %d pushes, %d reads (0 torn); serving equal %d ms after training"
                            + " stopped (interval %d ms); %d rows / %d bytes exported; s1 restarted: %d resyncs;"
                            + " lag now s0 %d ms, s1 %d ms%n", load.pushes.get(), load.reads.get(), tookMs, INTERVAL,
                            exported, bytes, s1b.follower().resyncs(), s0.follower().lagMillis(),
                            s1b.follower().lagMillis());

                    // A training server that stops answering: serving keeps serving its values, lag grows.
                    long[] ids = ids();
                    float[] before = reader.pull("emb", ids);
                    long failuresBefore = s0.follower().failures();
                    t1.server().close();
                    Members.await60(() -> s0.follower().failures() > failuresBefore
                            && s0.follower().lagMillis() > 5 * INTERVAL, "s0 reporting t1 unreachable");
                    assertTrue(s0.follower().lastError().contains(t1.address()), s0.follower().lastError());
                    assertTrue(Arrays.equals(before, reader.pull("emb", ids)), "serving still serves the last values");
                }
            } finally {
                for (int i = nodes.size() - 1; i >= 0; i--) {
                    nodes.get(i).close();
                }
            }
        }
    }

    private static long[] ids() {
        long[] ids = new long[IDS];
        for (int i = 0; i < IDS; i++) {
            ids[i] = i;
        }
        return ids;
    }

    /** Waits until every node installed a table naming all of them, with every group owned. */
    static void awaitOwning(List<Node> nodes) {
        Members.await(() -> {
            for (Node n : nodes) {
                var t = n.server().routingTable();
                if (t == null || t.serverCount() != nodes.size() || n.server().index() < 0
                        || t.groupCount(n.server().index()) == 0) {
                    return false;
                }
            }
            return nodes.stream().map(n -> n.membership().assignment()).allMatch(a -> a != null && a.move() == null);
        }, "members " + nodes.stream().map(Node::id).toList() + " each owning groups");
    }

    /** Training's rows, checked against the acknowledged sums. */
    private static float[] checkTraining(PsClient trainer, Load load) {
        long[] ids = ids();
        float[] expected = new float[IDS * DIM];
        for (int i = 0; i < IDS; i++) {
            Arrays.fill(expected, i * DIM, (i + 1) * DIM, (float) -load.acked[i].get());
        }
        float[] onTraining = trainer.pull("emb", ids);
        assertTrue(Arrays.equals(expected, onTraining), "training holds the acknowledged sums");
        return onTraining;
    }

    /** Whether each id's row in the table of the serving member that owns it equals {@code expected}. */
    private static boolean servingHolds(List<Node> serving, float[] expected) {
        float[] row = new float[DIM];
        java.lang.foreign.MemorySegment out = java.lang.foreign.MemorySegment.ofArray(row);
        for (int i = 0; i < IDS; i++) {
            Node owner = null;
            for (Node n : serving) {
                var t = n.server().routingTable();
                if (t != null && t.slots().serverOfSlot(dev.ferry.ps.Slots.slotOf(i)) == n.server().index()) {
                    owner = n;
                }
            }
            try {
                if (owner == null) {
                    return false;
                }
                owner.ps().pull("emb", DIM, new long[] {i}, 0, 1, out);
            } catch (dev.ferry.ps.PsException notYet) {
                return false;
            }
            for (int j = 0; j < DIM; j++) {
                if (row[j] != expected[i * DIM + j]) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Every row pulled from the serving cluster equals training's; 60 s at most. */
    private static void awaitEqual(PsClient reader, float[] onTraining) {
        long[] ids = ids();
        String[] last = {""};
        awaitOrSay(() -> {
            float[] onServing;
            try {
                onServing = reader.pull("emb", ids);
            } catch (RuntimeException e) {
                last[0] = e.toString();
                return false;
            }
            for (int i = 0; i < onServing.length; i++) {
                if (onServing[i] != onTraining[i]) {
                    last[0] = "id " + i / DIM + ": serving " + onServing[i] + ", training " + onTraining[i];
                    return false;
                }
            }
            return true;
        }, () -> "serving equal to training (last difference: " + last[0] + ")");
    }

    private static void awaitOrSay(java.util.function.BooleanSupplier condition, Supplier<String> what) {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what.get());
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        }
    }

    /** Two pushers on training and a reader on serving that checks every pulled row is whole. */
    private static final class Load {
        final PsClient trainer;
        final PsClient reader;
        final AtomicLong[] acked = new AtomicLong[IDS];
        final AtomicInteger next = new AtomicInteger(1);
        final AtomicLong pushes = new AtomicLong();
        final AtomicLong reads = new AtomicLong();
        final AtomicLong torn = new AtomicLong();
        final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        final AtomicBoolean stopPushes = new AtomicBoolean();
        final AtomicBoolean stopReads = new AtomicBoolean();
        final List<Thread> pushers = new ArrayList<>();
        Thread readerThread;

        Load(PsClient trainer, PsClient reader) {
            this.trainer = trainer;
            this.reader = reader;
            for (int i = 0; i < IDS; i++) {
                acked[i] = new AtomicLong();
            }
        }

        void start() {
            for (int w = 0; w < 2; w++) {
                SplittableRandom random = new SplittableRandom(w);
                pushers.add(Thread.ofPlatform().start(() -> {
                    long[] batch = new long[16];
                    float[] grads = new float[16 * DIM];
                    while (!stopPushes.get()) {
                        // 16 distinct ids, each with its own unique integer gradient in every element.
                        int base = random.nextInt(IDS / 16) * 16;
                        int[] k = new int[16];
                        for (int i = 0; i < 16; i++) {
                            batch[i] = base + i;
                            k[i] = next.getAndIncrement() % 4093 + 1;
                            Arrays.fill(grads, i * DIM, (i + 1) * DIM, k[i]);
                        }
                        try {
                            trainer.push("emb", batch, grads);
                            for (int i = 0; i < 16; i++) {
                                acked[(int) batch[i]].addAndGet(k[i]);
                            }
                            pushes.incrementAndGet();
                        } catch (RuntimeException e) {
                            failures.add(e);
                            return;
                        }
                    }
                }));
            }
            readerThread = Thread.ofPlatform().start(() -> {
                SplittableRandom random = new SplittableRandom(7);
                long[] ids = new long[64];
                while (!stopReads.get()) {
                    for (int i = 0; i < ids.length; i++) {
                        ids[i] = random.nextInt(IDS);
                    }
                    float[] rows;
                    try {
                        rows = reader.pull("emb", ids);
                    } catch (RuntimeException e) {
                        continue; // the serving member was down or its table not there yet
                    }
                    reads.incrementAndGet();
                    for (int i = 0; i < ids.length; i++) {
                        for (int j = 1; j < DIM; j++) {
                            if (rows[i * DIM + j] != rows[i * DIM]) {
                                torn.incrementAndGet();
                                break;
                            }
                        }
                    }
                }
            });
        }

        void awaitPushes(long more) {
            long target = pushes.get() + more;
            Members.await60(() -> pushes.get() >= target || !failures.isEmpty(), more + " more pushes");
        }

        void stopPushes() throws InterruptedException {
            stopPushes.set(true);
            for (Thread t : pushers) {
                t.join();
            }
        }

        void stopReads() throws InterruptedException {
            stopReads.set(true);
            readerThread.join();
        }
    }
}
