package dev.ferry.cluster;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.Slots;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.DeltaFollower;
import dev.ferry.ps.net.ExportService;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * The live export's cost and volume: a training cluster of two members and a serving cluster of
 * two followers in this process on an embedded ZooKeeper; one client pushes batches for a fixed
 * time (closed loop), in rounds alternating without followers (the baseline) and with them. Per
 * round: pushes per second; with followers also rows and bytes exported per second, bytes per
 * row, and after the pushes stop the time until every pushed row on serving equals training's,
 * and the followers' lag then. Not a test: a program.
 *
 * <pre>
 * java -cp ... dev.ferry.cluster.ExportBench [--transport tcp|shm] [--seconds s] [--ids n] [--batch n]
 *                                            [--dim n] [--interval ms] [--rounds n] [--optimizer sgd|adagrad]
 * </pre>
 */
public final class ExportBench {

    private ExportBench() {
    }

    public static void main(String[] args) throws Exception {
        String transport = "tcp";
        int seconds = 10;
        int ids = 100_000;
        int batch = 512;
        int dim = 32;
        long interval = 1_000;
        int rounds = 3;
        String optimizer = "adagrad";
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--transport" -> transport = args[++i];
                case "--seconds" -> seconds = Integer.parseInt(args[++i]);
                case "--ids" -> ids = Integer.parseInt(args[++i]);
                case "--batch" -> batch = Integer.parseInt(args[++i]);
                case "--dim" -> dim = Integer.parseInt(args[++i]);
                case "--interval" -> interval = Long.parseLong(args[++i]);
                case "--rounds" -> rounds = Integer.parseInt(args[++i]);
                case "--optimizer" -> optimizer = args[++i];
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Optimizer opt = optimizer.equals("sgd") ? Optimizer.sgd(0.1f) : Optimizer.adagrad(0.05f);
        Path dir = Files.createTempDirectory("ferry-export-bench");
        System.out.printf("export bench: %s, %d s a round, %d ids, batches of %d, dimension %d, %s, interval %d ms%n",
                transport, seconds, ids, batch, dim, optimizer, interval);
        double[] bestPushRate = new double[2];
        try (EmbeddedZooKeeper zk = EmbeddedZooKeeper.start(dir, 0, 250)) {
            for (int round = 0; round < rounds; round++) {
                for (int follow = 0; follow <= 1; follow++) {
                    double rate = run(zk.connectString(), "r" + round + "f" + follow, follow == 1, transport, seconds,
                            ids, batch, dim, interval, opt);
                    bestPushRate[follow] = Math.max(bestPushRate[follow], rate);
                }
            }
        }
        System.out.printf("best pushes/s: without export %.0f, with export %.0f (%.2fx)%n", bestPushRate[0],
                bestPushRate[1], bestPushRate[1] / bestPushRate[0]);
    }

    private record Node(ParameterServer ps, PsServer server, String address, ClusterMember member, ExportService export,
            DeltaFollower follower) implements AutoCloseable {
        @Override
        public void close() {
            if (follower != null) {
                follower.close();
            }
            member.close();
            server.close();
            ps.close();
        }
    }

    private static double run(String zk, String name, boolean follow, String transport, int seconds, int ids,
            int batch, int dim, long interval, Optimizer opt) throws Exception {
        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(4);
        TransportConfig tc = TransportConfig.defaults(transport).withPools(64L << 20, 32L << 20, 64L << 20);
        ClusterConfig train = ClusterConfig.of(zk, name + "-train").withReplication(1, 1).withMaxGroupsPerMove(1024);
        ClusterConfig serve = ClusterConfig.of(zk, name + "-serve").withReplication(1, 1).withMaxGroupsPerMove(1024);
        List<Node> nodes = new ArrayList<>();
        try (FollowedCluster followed = FollowedCluster.of(train.uri(), transport)) {
            for (int i = 0; i < 2; i++) {
                nodes.add(node(train, "t" + i, false, rpc, tc, interval, followed, i));
            }
            if (follow) {
                for (int i = 0; i < 2; i++) {
                    nodes.add(node(serve, "s" + i, true, rpc, tc, interval, followed, i + 2));
                }
            }
            await(() -> owning(nodes.subList(0, 2)) && (!follow || owning(nodes.subList(2, 4))), "the clusters' tables");
            try (PsClient client = PsClient.connect(rpc, tc, "ferry://" + nodes.get(0).address())) {
                client.createTable(TableConfig.of("emb", dim, opt));
                SplittableRandom random = new SplittableRandom(name.hashCode());
                long[] batchIds = new long[batch];
                float[] grads = new float[batch * dim];
                for (int i = 0; i < grads.length; i++) {
                    grads[i] = (float) random.nextDouble(-1, 1);
                }
                boolean[] touched = new boolean[ids];
                long pushes = 0;
                long start = System.nanoTime();
                long end = start + TimeUnit.SECONDS.toNanos(seconds);
                while (System.nanoTime() < end) {
                    int base = random.nextInt(ids);
                    for (int i = 0; i < batch; i++) {
                        int id = (base + i * 7919) % ids; // distinct within a batch
                        batchIds[i] = id;
                        touched[id] = true;
                    }
                    client.push("emb", batchIds, grads);
                    pushes++;
                }
                double elapsed = (System.nanoTime() - start) / 1e9;
                double rate = pushes / elapsed;
                if (!follow) {
                    System.out.printf("%s without export: %.0f pushes/s (%.0f rows/s)%n", name, rate, rate * batch);
                    return rate;
                }
                long stopped = System.nanoTime();
                long[] all = new long[(int) java.util.stream.IntStream.range(0, ids).filter(i -> touched[i]).count()];
                int k = 0;
                for (int i = 0; i < ids; i++) {
                    if (touched[i]) {
                        all[k++] = i;
                    }
                }
                float[] expected = client.pull("emb", all);
                await(() -> servingEquals(nodes.subList(2, 4), all, expected, dim), "serving equal to training");
                long equalMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stopped);
                long rows = 0;
                long bytes = 0;
                for (Node n : nodes.subList(0, 2)) {
                    rows += n.export().rowsExported();
                    bytes += n.export().bytesExported();
                }
                long lag = Math.max(nodes.get(2).follower().lagMillis(), nodes.get(3).follower().lagMillis());
                long entries = nodes.get(0).export().log().entries() + nodes.get(1).export().log().entries();
                long logBytes = nodes.get(0).export().log().bytes() + nodes.get(1).export().log().bytes();
                double total = (System.nanoTime() - start) / 1e9;
                System.out.printf("%s with export: %.0f pushes/s (%.0f rows/s); exported %d rows (%.0f rows/s), %.1f MiB"
                        + " (%.2f MiB/s, %d B/row) to 2 followers; %d distinct rows pushed; serving equal %d ms after the"
                        + " pushes stopped; lag then %d ms; change record %d ids, %.1f MiB%n", name, rate, rate * batch,
                        rows, rows / total, bytes / 1048576.0, bytes / 1048576.0 / total, rows == 0 ? 0 : bytes / rows,
                        all.length, equalMs, lag, entries, logBytes / 1048576.0);
                return rate;
            }
        } finally {
            for (int i = nodes.size() - 1; i >= 0; i--) {
                nodes.get(i).close();
            }
        }
    }

    private static Node node(ClusterConfig config, String id, boolean serving, RpcConfig rpc, TransportConfig tc,
            long interval, FollowedCluster followed, int n) {
        ParameterServer ps = serving ? ParameterServer.follower(PsConfig.defaults())
                : ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, id, null, rpc, false);
        ExportService export = serving ? null : ExportService.attach(server);
        String host = tc.provider().startsWith("shm") ? "127.0.0." + (10 + n) : "127.0.0.1";
        String address = server.listen(tc.withBindHost(host));
        ClusterMember member = ClusterMember.join(config, new MemberInfo(id, System.nanoTime(), "localhost",
                Map.of(tc.provider(), address), 1 << 20), server);
        DeltaFollower follower = serving ? DeltaFollower.start(server, followed, rpc, tc, interval) : null;
        return new Node(ps, server, address, member, export, follower);
    }

    private static boolean owning(List<Node> nodes) {
        for (Node n : nodes) {
            var t = n.server().routingTable();
            if (t == null || t.serverCount() != nodes.size() || n.server().index() < 0
                    || t.groupCount(n.server().index()) == 0 || n.member().assignment() == null
                    || n.member().assignment().move() != null) {
                return false;
            }
        }
        return true;
    }

    private static boolean servingEquals(List<Node> serving, long[] ids, float[] expected, int dim) {
        float[] row = new float[dim];
        MemorySegment out = MemorySegment.ofArray(row);
        for (int i = 0; i < ids.length; i++) {
            Node owner = null;
            for (Node n : serving) {
                var t = n.server().routingTable();
                if (t.slots().serverOfSlot(Slots.slotOf(ids[i])) == n.server().index()) {
                    owner = n;
                }
            }
            try {
                owner.ps().pull("emb", dim, ids, i, 1, out);
            } catch (RuntimeException notYet) {
                return false;
            }
            if (!Arrays.equals(row, 0, dim, expected, i * dim, (i + 1) * dim)) {
                return false;
            }
        }
        return true;
    }

    private static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }
}
