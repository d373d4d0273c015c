package dev.ferry.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.test.TestingServer;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.RoutingTable;

/**
 * Dense tensors on a cluster run by the controller on a real in-process ZooKeeper: a server
 * joins and one leaves cleanly while two threads push integer gradients (1 to 4,093 in turn; SGD, learning
 * rate 1) to many tensors and one pulls them. The tensors move with their slot groups; after
 * each change every tensor equals the exact sum of the pushes acknowledged to it, and the one
 * client followed; with one copy per group and with two.
 */
class DenseClusterTest {

    private static final int TENSORS = 32;
    private static final int LENGTH = 8;

    @Test
    void denseTensorsFollowTheirGroupsAcrossAJoinAndALeave() throws Exception {
        joinAndLeave(1);
    }

    /**
     * The same with two copies of every group: the join and the leave hand groups over to their
     * backups and rebuild copies, which carry the dense tensors; a tensor's calls after a
     * hand-over went to a backup that had none ({@code UNKNOWN_TABLE}) before dense pushes were
     * replicated.
     */
    @Test
    void denseTensorsKeepEveryPushAcrossHandOversAndCopiesWithTwoCopies() throws Exception {
        joinAndLeave(2);
    }

    private void joinAndLeave(int replicas) throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "dense").withSessionTimeoutMillis(5_000)
                    .withMaxGroupsPerMove(256).withReplication(replicas, 1);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a");
                Members.Member b = members.start("b");
                members.awaitBalanced(List.of("a", "b"));
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"), "ferry://" + a.address())) {
                    String[] names = new String[TENSORS];
                    for (int t = 0; t < TENSORS; t++) {
                        names[t] = "layer" + t;
                        client.createDense(new DenseConfig(names[t], LENGTH, Optimizer.sgd(1), Initializer.zeros()));
                    }
                    Load load = new Load(client, names);
                    load.start();
                    load.awaitPushes(200);
                    Members.Member c = members.start("c");
                    members.awaitBalanced(List.of("a", "b", "c"));
                    load.awaitPushes(200);
                    load.stopAndCheck("c joined");
                    assertTrue(owned(c, names) > 0, "some tensors moved to c");

                    load.start();
                    load.awaitPushes(200);
                    int onB = owned(b, names);
                    assertTrue(onB > 0, "b owns tensors before it leaves");
                    b.membership().drain().get(60, TimeUnit.SECONDS);
                    members.stop(b);
                    members.awaitBalanced(List.of("a", "c"));
                    load.awaitPushes(200);
                    load.stopAndCheck("b left (it owned " + onB + " tensors)");
                    System.out.printf("[dense-cluster] r=" + replicas + ": %d dense pushes across a join and a leave; the client retried"
                            + " %d requests, fetched %d tables%n", load.pushes.get(), client.retries(),
                            client.refreshes());
                }
            }
        }
    }

    /**
     * Two copies of every group, three members; one of them is lost without a goodbye (closed
     * without a drain: its member node goes, its groups are promoted on their backups): every
     * tensor still equals the exact sum of the pushes acknowledged to it, none lost, none applied
     * twice (the client retries the pushes it sent to the lost member, with their dedupe ids).
     */
    @Test
    void denseTensorsKeepEveryAcknowledgedPushWhenAMemberIsLostWithTwoCopies() throws Exception {
        try (TestingServer zk = new TestingServer(ClusterTest.spec(), true)) {
            ClusterConfig config = ClusterConfig.of(zk.getConnectString(), "dense-lost").withSessionTimeoutMillis(5_000)
                    .withMaxGroupsPerMove(512).withReplication(2, 1);
            try (Members members = new Members(config, "tcp")) {
                Members.Member a = members.start("a");
                Members.Member b = members.start("b");
                members.start("c");
                members.awaitBalanced(List.of("a", "b", "c"));
                Members.await(() -> {
                    Assignment n = members.newest();
                    for (int g = 0; g < RoutingTable.GROUPS; g++) {
                        if (n.backupsOf(g).size() != 1) {
                            return false;
                        }
                    }
                    return n.move() == null;
                }, "a backup for every group");
                try (PsClient client = PsClient.connect(Members.rpc(), Members.transport("tcp"), "ferry://" + a.address())) {
                    String[] names = new String[TENSORS];
                    for (int t = 0; t < TENSORS; t++) {
                        names[t] = "lost" + t;
                        client.createDense(new DenseConfig(names[t], LENGTH, Optimizer.sgd(1), Initializer.zeros()));
                    }
                    Load load = new Load(client, names);
                    load.start();
                    load.awaitPushes(300);
                    int onB = owned(b, names);
                    assertTrue(onB > 0, "b leads some tensors");
                    members.stop(b); // no drain
                    members.awaitBalanced(List.of("a", "c"));
                    load.awaitPushes(300);
                    load.stopAndCheck("b lost (it led " + onB + " tensors)");
                    System.out.printf("[dense-cluster] r=2, a member lost: %d dense pushes; the client retried %d requests%n",
                            load.pushes.get(), client.retries());
                }
            }
        }
    }

    /** How many of the tensors {@code m} owns in its table. */
    private static int owned(Members.Member m, String[] names) {
        RoutingTable t = m.server().routingTable();
        int n = 0;
        for (String name : names) {
            n += t.slots().serverOf(dev.ferry.ps.net.PsDescriptor.denseKey(name)) == m.server().index() ? 1 : 0;
        }
        return n;
    }

    /** Two pushers and a puller; the oracle keeps, per tensor, the sum of acknowledged pushes. */
    private static final class Load {
        private final PsClient client;
        private final String[] names;
        private final double[] acked;
        private final AtomicInteger nextGradient = new AtomicInteger(1);
        private final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        final AtomicLong pushes = new AtomicLong();
        private AtomicBoolean stop;
        private List<Thread> threads;

        Load(PsClient client, String[] names) {
            this.client = client;
            this.names = names;
            this.acked = new double[names.length];
        }

        void start() {
            AtomicBoolean halt = new AtomicBoolean();
            stop = halt;
            threads = new ArrayList<>();
            for (int w = 0; w < 2; w++) {
                SplittableRandom random = new SplittableRandom(w + 31L * nextGradient.get());
                threads.add(Thread.ofPlatform().start(() -> {
                    float[] grads = new float[LENGTH];
                    while (!halt.get()) {
                        int t = random.nextInt(names.length);
                        // Integers below 4,094: each tensor's sum stays exact in a float (< 2^24) for
                        // well over 100,000 pushes; a lost or doubled push still shows.
                        int k = nextGradient.getAndIncrement() % 4093 + 1;
                        Arrays.fill(grads, -k);
                        try {
                            client.pushDense(names[t], grads);
                        } catch (RuntimeException e) {
                            failures.add(e);
                            return;
                        }
                        synchronized (acked) {
                            acked[t] += k;
                        }
                        pushes.incrementAndGet();
                    }
                }));
            }
            threads.add(Thread.ofPlatform().start(() -> {
                SplittableRandom random = new SplittableRandom(5);
                while (!halt.get()) {
                    try {
                        client.pullDense(names[random.nextInt(names.length)]);
                    } catch (RuntimeException e) {
                        failures.add(e);
                        return;
                    }
                }
            }));
        }

        void awaitPushes(long n) {
            long target = pushes.get() + n;
            Members.await(() -> pushes.get() >= target || !failures.isEmpty(), n + " more dense pushes");
            assertTrue(failures.isEmpty(), () -> "the workload failed: " + failures);
        }

        void stopAndCheck(String after) throws InterruptedException {
            stop.set(true);
            for (Thread t : threads) {
                t.join(60_000);
            }
            assertTrue(failures.isEmpty(), () -> "failed after " + after + ": " + failures);
            for (int t = 0; t < names.length; t++) {
                float[] w = client.pullDense(names[t]);
                for (int j = 0; j < LENGTH; j++) {
                    assertEquals((float) acked[t], w[j], names[t] + "[" + j + "] after " + after + ", "
                            + pushes.get() + " pushes");
                }
            }
        }
    }
}
