package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;

/**
 * Dense tensors move with their slot group under a continuous push and pull workload, with the
 * flip installed in either order: SGD with learning rate 1 and an integer gradient per push (1 to
 * 4,093 in turn), so after each move every tensor must equal exactly the sum of the pushes acknowledged to
 * it (none lost, none applied twice), and the one client follows every move. A move back to a
 * server holding a stale copy replaces it. Malformed or misdirected {@code MOVE_DENSE} calls and
 * a retried push are checked apart.
 */
class DenseMoveTest extends PsNetTestBase {

    private static final int TENSORS = 24;
    private static final int LENGTH = 4;

    @ParameterizedTest
    @MethodSource("providers")
    void denseTensorsMoveWithTheirGroupsExactly(String provider) throws Exception {
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = new ArrayList<>();
        List<ParameterServer> tables = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            ParameterServer ps = ParameterServer.create(PsConfig.defaults());
            PsServer server = PsServer.openMember(ps, "m" + i, null, rpc(), false);
            addresses.add(server.listen(config(provider)));
            track(ps, server);
            servers.add(server);
            tables.add(ps);
        }
        List<String> ids = List.of("m0", "m1", "m2");
        int[] owners = new int[RoutingTable.GROUPS];
        for (int g = 0; g < owners.length; g++) {
            owners[g] = g < RoutingTable.GROUPS / 2 ? 0 : 1; // m2 owns nothing yet
        }
        AtomicLong generation = new AtomicLong(1);
        RoutingTable first = RoutingTable.of(generation.get(), ids, addresses, owners);
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, List.of(addresses.get(0)));
        String[] names = new String[TENSORS];
        int[] groups = new int[TENSORS];
        for (int t = 0; t < TENSORS; t++) {
            names[t] = "dense" + t;
            groups[t] = DenseMove.groupOf(names[t]);
            client.createDense(new DenseConfig(names[t], LENGTH, Optimizer.sgd(1), Initializer.zeros()));
        }
        Load load = new Load(client, names);
        int half = RoutingTable.GROUPS / 2;
        // Move 1: all of m0's groups to m2; the new owner installs the flip first.
        load.start();
        move(servers, ids, addresses, owners, generation, 1, 0, 2, 0, half, true);
        load.stopAndCheck(client, "move 1");
        assertHeld(tables, groups, owners, 0, half);
        // Move 2: all of m1's groups to m2; the old owner installs the flip first.
        load.start();
        move(servers, ids, addresses, owners, generation, 2, 1, 2, half, RoutingTable.GROUPS, false);
        load.stopAndCheck(client, "move 2");
        // Move 3: half of them back to m0, which holds stale copies from before move 1.
        load.start();
        move(servers, ids, addresses, owners, generation, 3, 2, 0, 0, half / 2, true);
        load.stopAndCheck(client, "move 3");
        assertEquals(generation.get(), client.routingTable().generation(), "the client followed every move");
        int moved = 0;
        for (int g : groups) {
            moved += g < half / 2 ? 1 : 0;
        }
        assertTrue(moved > 0 && moved < TENSORS, "move 3 carries some of the tensors, not all: " + moved);
    }

    /** Tensors of groups [from, to) are on their owner with the step count the others' copies lack or match. */
    private static void assertHeld(List<ParameterServer> tables, int[] groups, int[] owners, int from, int to) {
        for (int t = 0; t < groups.length; t++) {
            if (groups[t] >= from && groups[t] < to) {
                DenseTensor moved = tables.get(owners[groups[t]]).dense("dense" + t);
                assertTrue(moved.steps() > 0, "dense" + t + " came with its steps");
            }
        }
    }

    @Test
    void aRetriedDensePushIsAppliedOnce() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            DenseTensor tensor = ps.createDense(new DenseConfig("d", 2, Optimizer.sgd(1), Initializer.zeros()));
            DedupeWindow window = new DedupeWindow();
            MemorySegment grads = MemorySegment.ofArray(new float[] {-3, -3});
            assertTrue(DenseMove.apply(tensor, grads, 77, window));
            assertFalse(DenseMove.apply(tensor, grads, 77, window), "the same dedupe id again");
            assertTrue(DenseMove.apply(tensor, grads, 78, window));
            assertTrue(DenseMove.apply(tensor, grads, 0, window), "0: no dedupe id");
            assertTrue(DenseMove.apply(tensor, grads, 0, window));
            assertEquals(4, tensor.steps());
            float[] out = new float[2];
            tensor.read(0, 2, MemorySegment.ofArray(out));
            assertEquals(12f, out[0]);
        }
    }

    @Test
    void malformedOrMisdirectedMoveDenseIsRefused() throws Exception {
        try (ParameterServer source = ParameterServer.create(PsConfig.defaults());
                ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            DenseTensor tensor = source.createDense(new DenseConfig("d", 3, Optimizer.adagrad(0.1), Initializer.zeros()));
            tensor.apply(MemorySegment.ofArray(new float[] {1, 2, 3}));
            byte[] good = DenseMove.body(9, tensor, 5, true);
            DenseMove.Received r = DenseMove.read(MemorySegment.ofArray(good));
            assertEquals(tensor.config(), r.config());
            assertTrue(r.snapshot());
            assertEquals(1, dev.ferry.ps.DenseTransfer.stepsOf(r.row()));
            // Truncated anywhere: a length error naming the part, never an out-of-bounds read.
            for (int cut : new int[] {good.length - 1, good.length - 8, PsDescriptor.payloadOffset(1) + 4}) {
                PsException e = expect(PsException.Code.LENGTH_MISMATCH,
                        () -> DenseMove.read(MemorySegment.ofArray(Arrays.copyOf(good, cut))));
                assertTrue(e.getMessage().contains("MOVE_DENSE"), e.getMessage());
            }
            // A stale copy with fewer steps does not replace a newer one, unless it is the snapshot's.
            DenseTensor there = DenseMove.tensor(ps, r.config());
            assertTrue(dev.ferry.ps.DenseTransfer.merge(there, r.row(), false));
            tensor.apply(MemorySegment.ofArray(new float[] {1, 1, 1}));
            DenseMove.Received newer = DenseMove.read(MemorySegment.ofArray(DenseMove.body(9, tensor, 6, false)));
            assertTrue(dev.ferry.ps.DenseTransfer.merge(there, newer.row(), false));
            assertFalse(dev.ferry.ps.DenseTransfer.merge(there, r.row(), false), "fewer steps");
            assertEquals(2, there.steps());
            assertTrue(dev.ferry.ps.DenseTransfer.merge(there, r.row(), true), "the snapshot's copy");
            assertEquals(1, there.steps());
            // Another tensor of the same name and another length: refused, not half-copied.
            ParameterServer other = ParameterServer.create(PsConfig.defaults());
            try (other) {
                DenseTensor wider = other.createDense(new DenseConfig("d", 5, Optimizer.adagrad(0.1), Initializer.zeros()));
                MemorySegment row = DenseMove.read(MemorySegment.ofArray(DenseMove.body(9, wider, 0, true))).row();
                expect(PsException.Code.LENGTH_MISMATCH, () -> dev.ferry.ps.DenseTransfer.merge(there, row, true));
                assertEquals(1, there.steps());
            }
        }
    }

    /** Protocol, not transport: on the in-JVM one. */
    @Test
    void aTargetRefusesTensorsOfAMoveItIsNotReceivingAndAfterTheFlip() throws Exception {
        String provider = "local";
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            ParameterServer ps = ParameterServer.create(PsConfig.defaults());
            PsServer server = PsServer.openMember(ps, "m" + i, null, rpc(), false);
            addresses.add(server.listen(config(provider)));
            track(ps, server);
            servers.add(server);
        }
        int[] owners = new int[RoutingTable.GROUPS];
        RoutingTable first = RoutingTable.of(1, List.of("m0", "m1"), addresses, owners); // m0 owns all
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, List.of(addresses.get(0)));
        client.createDense(new DenseConfig("w", 2, Optimizer.sgd(1), Initializer.zeros()));
        client.pushDense("w", new float[] {-1, -1});
        ParameterServer scratch = ParameterServer.create(PsConfig.defaults());
        try (scratch) {
            DenseTensor copy = scratch.createDense(new DenseConfig("w", 2, Optimizer.sgd(1), Initializer.zeros()));
            byte[] body = DenseMove.body(42, copy, 0, true);
            var rpc = client.rpcClient().channel(addresses.get(1));
            // No move 42 is being received by m1.
            PsException notReceiving = callExpecting(rpc, body);
            assertEquals(PsException.Code.INVALID_ARGUMENT, notReceiving.code(), notReceiving::toString);
            // m1 owns the group: its old owner's copy is fenced out.
            int g = DenseMove.groupOf("w");
            owners[g] = 1;
            servers.get(1).install(RoutingTable.of(2, List.of("m0", "m1"), addresses, owners));
            PsException fenced = callExpecting(rpc, body);
            assertEquals(PsException.Code.WRONG_SERVER, fenced.code(), fenced::toString);
        }
        // m0 does not know the flip yet; once it does, the client's next call follows it to m1,
        // where the tensor never came (no move carried it): it says so rather than make one up.
        servers.get(0).install(RoutingTable.of(2, List.of("m0", "m1"), addresses, owners));
        expect(PsException.Code.UNKNOWN_TABLE, () -> client.pullDense("w"));
    }

    /**
     * A copy to a new backup carries the group's dense tensors (dense pushes are replicated to
     * backups) and replaces the stale copy the backup kept from when it owned the group, even one
     * with more steps (another lineage), so that a backup promoted later serves the current one.
     */
    @Test
    void aCopyToABackupReplacesItsStaleDenseCopyWithTheCurrentOne() throws Exception {
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = new ArrayList<>();
        List<ParameterServer> tables = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            ParameterServer ps = ParameterServer.create(PsConfig.defaults());
            PsServer server = PsServer.openMember(ps, "m" + i, null, rpc(), false);
            addresses.add(server.listen(config("local")));
            track(ps, server);
            servers.add(server);
            tables.add(ps);
        }
        List<String> ids = List.of("m0", "m1");
        int[] owners = new int[RoutingTable.GROUPS]; // m0 owns all
        AtomicLong generation = new AtomicLong(1);
        RoutingTable first = RoutingTable.of(1, ids, addresses, owners);
        servers.forEach(s -> s.install(first));
        PsClient client = client("local", List.of(addresses.get(0)));
        client.createDense(new DenseConfig("w", 2, Optimizer.sgd(1), Initializer.zeros()));
        client.pushDense("w", new float[] {-2, -2});
        int g = DenseMove.groupOf("w");
        // The group moves to m1 (the tensor with it); m0 keeps its old copy.
        move(servers, ids, addresses, owners, generation, 1, 0, 1, g, g + 1, true);
        client.pushDense("w", new float[] {-3, -3});
        assertEquals(5f, client.pullDense("w")[0]);
        assertEquals(1, tables.get(0).dense("w").steps(), "m0's stale copy");
        // Give the stale copy more steps than the current one: the merge by steps alone would keep it.
        for (int i = 0; i < 3; i++) {
            tables.get(0).dense("w").apply(MemorySegment.ofArray(new float[] {-100, -100}));
        }
        // m1 copies the group to m0, its new backup: the stale copy goes, the current one comes.
        servers.get(1).moveOut(2, new int[] {g}, addresses.get(0), true);
        servers.get(1).endMove(2);
        servers.get(0).endMove(2);
        assertEquals(2, tables.get(0).dense("w").steps(), "the copy brought the current tensor");
        float[] copied = new float[2];
        tables.get(0).dense("w").read(0, 2, MemorySegment.ofArray(copied));
        assertEquals(5f, copied[0]);
        assertEquals(2, tables.get(1).dense("w").steps());
        assertEquals(5f, client.pullDense("w")[0]);
    }

    private static PsException callExpecting(dev.ferry.rpc.RpcChannel channel, byte[] body) throws Exception {
        try {
            channel.call(DenseMove.MOVE_DENSE, body.length,
                    s -> MemorySegment.copy(MemorySegment.ofArray(body), 0, s, 0, body.length), 5_000)
                    .get(10, TimeUnit.SECONDS).release();
        } catch (java.util.concurrent.ExecutionException e) {
            return refusal(e, channel.address());
        }
        throw new AssertionError("MOVE_DENSE was accepted");
    }

    /** Moves groups [from, to) from server {@code a} to {@code b}, then flips in the order asked. */
    private static void move(List<PsServer> servers, List<String> ids, List<String> addresses, int[] owners,
            AtomicLong generation, long moveId, int a, int b, int fromGroup, int toGroup, boolean newOwnerFirst)
            throws InterruptedException {
        int[] groups = new int[toGroup - fromGroup];
        for (int g = fromGroup; g < toGroup; g++) {
            groups[g - fromGroup] = g;
            assertEquals(a, owners[g]);
        }
        Thread.sleep(100); // pushes before the move
        servers.get(a).moveOut(moveId, groups, addresses.get(b));
        Thread.sleep(100); // pushes forwarded
        for (int g : groups) {
            owners[g] = b;
        }
        RoutingTable flipped = RoutingTable.of(generation.incrementAndGet(), ids, addresses, owners);
        PsServer first = newOwnerFirst ? servers.get(b) : servers.get(a);
        PsServer second = newOwnerFirst ? servers.get(a) : servers.get(b);
        first.install(flipped);
        Thread.sleep(20); // let pushes meet the half-installed table
        second.install(flipped);
        for (PsServer s : servers) {
            s.install(flipped);
        }
        servers.get(a).endMove(moveId);
        servers.get(b).endMove(moveId);
        Thread.sleep(100); // pushes after the flip
    }

    /** Two pushers and a puller on the tensors; the oracle keeps the sum of acknowledged pushes. */
    private static final class Load {
        private final PsClient client;
        private final String[] names;
        private final double[] acked;
        private final AtomicInteger nextGradient = new AtomicInteger(1);
        private final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        private final AtomicLong pushes = new AtomicLong();
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
                SplittableRandom random = new SplittableRandom(7);
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

        void stopAndCheck(PsClient reader, String after) throws InterruptedException {
            stop.set(true);
            for (Thread t : threads) {
                t.join(60_000);
            }
            assertTrue(failures.isEmpty(), () -> "failed " + after + ": " + failures);
            assertTrue(pushes.get() > 0, "no push " + after);
            for (int t = 0; t < names.length; t++) {
                float[] w = reader.pullDense(names[t]);
                for (int j = 0; j < LENGTH; j++) {
                    assertEquals((float) acked[t], w[j], names[t] + "[" + j + "] " + after + ", " + pushes.get()
                            + " pushes");
                }
            }
        }
    }
}
