package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcResponse;

/**
 * Dense pushes replicated to the in-sync backups of the tensor's slot group: driven step by
 * step with raw {@code CREATE_TABLE} and {@code DENSE_PUSH} requests (chosen dedupe ids and
 * generations, no client retries) on in-process members (tcp), the tables installed by the test.
 * SGD with learning rate 1 and integer gradients, so every weight is an exact sum. A primary
 * lost without a goodbye (its server closed), its backup promoted: the acknowledged pushes are
 * there exactly once, and a retry of one is deduped; a copy to a new backup carries the tensor
 * and its dedupe ids; a backup that knows a newer epoch fences the deposed primary's push; a
 * backup that misses the replication timeout is reported, and the push is acknowledged once the
 * table without it is installed.
 */
class DenseReplicaTest extends RawMembersTestBase {

    private static final String TENSOR = "w";
    private static final int GROUP = DenseMove.groupOf(TENSOR);
    private static final int P = 0;
    private static final int B = 1;
    private static final int C = 2;

    private final List<String> ids = List.of("p", "b", "c");

    private void start() throws Exception {
        startMembers(ids, false);
        // A session with every member first: a loaded machine took longer than a call's deadline
        // to set up the first one with a member the test reaches only after another was closed.
        for (int s = 0; s < ids.size(); s++) {
            raw.channel(addresses.get(s)).call(PsDescriptor.DESCRIBE, PsDescriptor.payloadOffset(0),
                    body -> PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, new byte[0], 0, 0, 0), 30_000)
                    .get(40, TimeUnit.SECONDS).release();
        }
    }

    /** Generation {@code gen}: {@link #GROUP} led by {@code owner} at {@code epoch} with {@code backups}; the rest P's, unreplicated. */
    private void install(long gen, int owner, long epoch, int[] backups, int... on) {
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, P);
        owners[GROUP] = owner;
        long[] epochs = new long[RoutingTable.GROUPS];
        epochs[GROUP] = epoch;
        int[][] b = new int[RoutingTable.GROUPS][];
        b[GROUP] = backups;
        RoutingTable table = RoutingTable.of(gen, ids, addresses, owners);
        for (int s : on) {
            servers.get(s).install(table, Replicas.of(gen, epochs, b, 1));
        }
    }

    private void create(int server) throws Exception {
        byte[] name = PsDescriptor.nameBytes(TENSOR);
        DenseConfig config = new DenseConfig(TENSOR, 2, Optimizer.sgd(1), Initializer.zeros());
        raw.channel(addresses.get(server)).call(PsDescriptor.CREATE_TABLE, PsDescriptor.createBytes(name.length),
                body -> PsDescriptor.writeCreate(body, name, config), 5_000).get(10, TimeUnit.SECONDS).release();
    }

    /** One raw DENSE_PUSH of {@code grad} on both weights to {@code server}; the refusal's code, or null if acknowledged. */
    private PsException.Code push(int server, long generation, long dedupe, float grad) throws Exception {
        byte[] name = PsDescriptor.nameBytes(TENSOR);
        int bytes = PsDescriptor.payloadOffset(name.length) + 2 * Float.BYTES;
        try {
            RpcResponse r = raw.channel(addresses.get(server)).call(PsDescriptor.DENSE_PUSH, bytes, body -> {
                int at = PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, 2, 2, 0);
                PsDescriptor.stamp(body, generation, dedupe);
                body.set(PsDescriptor.FLOAT, at, grad);
                body.set(PsDescriptor.FLOAT, at + 4, grad);
            }, 5_000).get(10, TimeUnit.SECONDS);
            r.release();
            return null;
        } catch (ExecutionException e) {
            return refusal(e, addresses.get(server)).code();
        }
    }

    private float[] weights(int server) {
        float[] out = new float[2];
        stores.get(server).dense(TENSOR).read(0, 2, MemorySegment.ofArray(out));
        return out;
    }

    private long steps(int server) {
        return stores.get(server).dense(TENSOR).steps();
    }

    @Test
    void acknowledgedDensePushesSurviveTwoFailoversExactlyOnce() throws Exception {
        start();
        long a = 0xA1;
        long x = 0xB2;
        long y = 0xC3;
        long z = 0xD4;
        install(1, P, 0, new int[] {B}, P, B, C);
        create(P);
        assertEquals(0, steps(B), "the tensor reached its backup when it was created, before any push");

        assertNull(push(P, 1, a, -1), "A acknowledged at P");
        assertArrayEquals(new float[] {1, 1}, weights(B), "and replicated to B");
        create(P); // a client's retry of the creation after a lost answer: done, nothing reset
        assertArrayEquals(new float[] {1, 1}, weights(P));
        assertArrayEquals(new float[] {1, 1}, weights(B));
        assertNull(push(P, 1, a, -1), "A's retry at P: deduped, acknowledged");
        assertNull(push(P, 1, x, -10), "X acknowledged at P");
        assertArrayEquals(new float[] {11, 11}, weights(P));
        assertArrayEquals(new float[] {11, 11}, weights(B), "B holds A and X once each");
        assertEquals(2, steps(B));

        // P dies without a goodbye; B, the in-sync backup, is promoted (epoch 1), no backup left.
        servers.get(P).close();
        install(2, B, 1, new int[0], B, C);
        assertNull(push(B, 2, x, -10), "X's retry at the promoted B: deduped (its id came with the row)");
        assertArrayEquals(new float[] {11, 11}, weights(B));
        assertNull(push(B, 2, y, -100), "Y acknowledged at B alone");

        // The lost copy is rebuilt on C: a copy carries the tensor and the dedupe ids.
        servers.get(B).moveOut(3, new int[] {GROUP}, addresses.get(C), true);
        assertArrayEquals(new float[] {111, 111}, weights(C), "the copy's snapshot brought the tensor");
        install(3, B, 1, new int[] {C}, B, C);
        servers.get(B).endMove(3);
        servers.get(C).endMove(3);
        assertNull(push(B, 3, z, -1000), "Z acknowledged at B, replicated to C");
        assertArrayEquals(new float[] {1111, 1111}, weights(C));

        // B dies too; C is promoted (epoch 2). Every retry there is deduped.
        servers.get(B).close();
        install(4, C, 2, new int[0], C);
        for (long retry : new long[] {a, x, y, z}) {
            assertNull(push(C, 4, retry, -7), "a retry at C, deduped");
        }
        assertArrayEquals(new float[] {1111, 1111}, weights(C), "A, X, Y and Z exactly once each");
        assertEquals(4, steps(C));
        assertNull(push(C, 4, 0xE5, -1), "a new push at C");
        assertArrayEquals(new float[] {1112, 1112}, weights(C));
    }

    @Test
    void aDenseBackupThatMissesTheReplicationTimeoutIsReportedAndThePushWaitsForTheTableWithoutIt()
            throws Exception {
        start();
        install(1, P, 0, new int[0], P, B);
        create(P);
        assertNull(push(P, 1, 0x31, -1), "acknowledged at P, which has no backup yet");
        java.util.concurrent.CountDownLatch reported = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicReference<String> report = new java.util.concurrent.atomic.AtomicReference<>();
        servers.get(P).replication(200, (backup, groups, epochs) -> {
            report.set(backup + " " + Arrays.toString(groups) + " " + Arrays.toString(epochs));
            reported.countDown();
        });
        // P's table names B the tensor's backup at generation 2; B is slow to install it, so it
        // answers that it is behind until P's replication timeout runs out.
        install(2, P, 0, new int[] {B}, P);
        java.util.concurrent.CompletableFuture<PsException.Code> pushed =
                java.util.concurrent.CompletableFuture.supplyAsync(() -> {
                    try {
                        return push(P, 2, 0x32, -10);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
        assertTrue(reported.await(10, TimeUnit.SECONDS), "B, behind, was reported out of sync");
        assertEquals("b [" + GROUP + "] [0]", report.get(), "the backup, the tensor's group and its epoch");
        assertTrue(!pushed.isDone(), "not acknowledged while B is still in P's in-sync set");
        // The controller's answer: the table without B.
        install(3, P, 0, new int[0], P);
        assertNull(pushed.get(15, TimeUnit.SECONDS), "acknowledged once P's table dropped B");
        assertArrayEquals(new float[] {11, 11}, weights(P), "applied once at P");
        assertEquals(2, steps(P));
        expect(PsException.Code.UNKNOWN_TABLE, () -> stores.get(B).dense(TENSOR));
    }

    @Test
    void aBackupThatKnowsANewerEpochFencesTheDeposedPrimarysDensePush() throws Exception {
        start();
        long a = 0x1F;
        install(1, P, 0, new int[] {B}, P, B);
        create(P);
        // B was promoted; P has not heard yet.
        install(2, B, 1, new int[0], B);
        assertEquals(PsException.Code.WRONG_SERVER, push(P, 1, a, -1), "fenced by B: not acknowledged");
        assertArrayEquals(new float[] {0, 0}, weights(B), "B took nothing of it");
        assertNull(push(B, 2, a, -1), "A's retry at the new primary");
        assertArrayEquals(new float[] {1, 1}, weights(B), "applied once");
    }

    @Test
    void aMalformedReplicateDenseIsRefusedWithItsReason() {
        try (ParameterServer source = ParameterServer.create(dev.ferry.ps.PsConfig.defaults())) {
            DenseTensor tensor = source.createDense(new DenseConfig(TENSOR, 3, Optimizer.adagrad(0.1), Initializer.zeros()));
            tensor.apply(MemorySegment.ofArray(new float[] {1, 2, 3}));
            byte[] good = DenseReplication.body(5, 77, GROUP, 2, tensor);
            DenseReplication.Received r = DenseReplication.read(MemorySegment.ofArray(good));
            assertEquals(tensor.config(), r.config());
            assertEquals(1, dev.ferry.ps.DenseTransfer.stepsOf(r.row()));
            for (int cut : new int[] {good.length - 1, good.length - 8, PsDescriptor.payloadOffset(1) + 20}) {
                PsException e = expect(PsException.Code.LENGTH_MISMATCH,
                        () -> DenseReplication.read(MemorySegment.ofArray(Arrays.copyOf(good, cut))));
                assertTrue(e.getMessage().contains("REPLICATE_DENSE"), e.getMessage());
            }
            byte[] otherGroup = DenseReplication.body(5, 77, (GROUP + 1) % RoutingTable.GROUPS, 2, tensor);
            PsException e = expect(PsException.Code.INVALID_ARGUMENT,
                    () -> DenseReplication.read(MemorySegment.ofArray(otherGroup)));
            assertTrue(e.getMessage().contains("names group"), e.getMessage());
        }
    }
}
