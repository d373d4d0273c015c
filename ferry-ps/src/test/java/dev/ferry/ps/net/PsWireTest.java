package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.BatchPlan;
import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** The parameter server over the wire, servers in this JVM, on every transport. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PsWireTest extends PsNetTestBase {

    private static final int SERVERS = 2;

    /** The reference: a local server applying each batch as the client sends it (duplicates summed). */
    private static void pushLocal(ParameterServer local, String table, int dimension, long[] ids, float[] grads) {
        BatchPlan plan = BatchPlan.of(ids, 0, ids.length, SlotTable.balanced(1));
        if (plan.parts() == 0) {
            return;
        }
        float[] summed = new float[plan.partSize(0) * dimension];
        plan.sumGradients(0, MemorySegment.ofArray(grads), dimension, MemorySegment.ofArray(summed));
        local.push(table, dimension, plan.ids(0), 0, plan.partSize(0), MemorySegment.ofArray(summed));
    }

    private static float[] pullLocal(ParameterServer local, String table, int dimension, long[] ids) {
        float[] out = new float[ids.length * dimension];
        local.pull(table, dimension, ids, 0, ids.length, MemorySegment.ofArray(out));
        return out;
    }

    private static void assertBitsEqual(float[] expected, float[] actual, String what) {
        assertEquals(expected.length, actual.length, what);
        for (int i = 0; i < expected.length; i++) {
            if (Float.floatToRawIntBits(expected[i]) != Float.floatToRawIntBits(actual[i])) {
                throw new AssertionError(what + ": element " + i + " is " + actual[i] + ", expected " + expected[i]);
            }
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void pullAfterPushIsTheOptimizersResult(String provider) {
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), null);
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            List<TableConfig> tables = List.of(
                    TableConfig.of("adagrad", 16, Optimizer.adagrad(0.05)).withInitializer(Initializer.uniform(-0.1, 0.1, 7)),
                    TableConfig.of("adam", 8, Optimizer.adam(0.01)).withInitializer(Initializer.normal(0, 0.1, 3)),
                    TableConfig.of("ftrl", 4, Optimizer.ftrl(0.1)));
            SplittableRandom random = new SplittableRandom(42);
            for (TableConfig t : tables) {
                c.client().createTable(t);
                local.createTable(t);
                int d = t.dimension();
                List<Long> seen = new ArrayList<>();
                for (int round = 0; round < 20; round++) {
                    long[] ids = new long[1 + random.nextInt(300)];
                    for (int i = 0; i < ids.length; i++) {
                        ids[i] = random.nextLong(500);
                        seen.add(ids[i]);
                    }
                    float[] grads = new float[ids.length * d];
                    for (int i = 0; i < grads.length; i++) {
                        grads[i] = (float) random.nextGaussian();
                    }
                    if (round % 2 == 0) {
                        c.client().push(t.name(), ids, grads);
                    } else {
                        c.client().pushAsync(t.name(), ids, grads).join();
                    }
                    pushLocal(local, t.name(), d, ids, grads);
                }
                long[] all = seen.stream().mapToLong(Long::longValue).toArray();
                assertBitsEqual(pullLocal(local, t.name(), d, all), c.client().pull(t.name(), all), t.name());
                assertEquals(local.describe(t.name()).rows(), c.client().describe(t.name()).rows());
            }
            DenseConfig dense = new DenseConfig("bias", 300, Optimizer.adam(0.01), Initializer.uniform(-1, 1, 5));
            c.client().createDense(dense);
            local.createDense(dense);
            for (int round = 0; round < 5; round++) {
                float[] grads = new float[dense.length()];
                for (int i = 0; i < grads.length; i++) {
                    grads[i] = (float) random.nextGaussian();
                }
                c.client().pushDense("bias", grads);
                local.dense("bias").apply(MemorySegment.ofArray(grads));
            }
            float[] expected = new float[dense.length()];
            local.dense("bias").read(0, dense.length(), MemorySegment.ofArray(expected));
            assertBitsEqual(expected, c.client().pullDense("bias"), "dense");
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void concurrentPushersGiveTheSerialResult(String provider) throws Exception {
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), null);
        int dimension = 8;
        int keys = 64;
        int pushers = 16;
        int batches = 40;
        c.client().createTable(TableConfig.of("sgd", dimension, Optimizer.sgd(0.5)));
        double[] sum = new double[keys * dimension];
        List<long[]> idsOf = new ArrayList<>();
        List<float[]> gradsOf = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(7);
        for (int b = 0; b < pushers * batches; b++) {
            long[] ids = new long[1 + random.nextInt(48)];
            float[] grads = new float[ids.length * dimension];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = random.nextInt(keys);
                for (int j = 0; j < dimension; j++) {
                    // Multiples of 1/64: sums stay exact in f32, so any order gives the same state.
                    grads[i * dimension + j] = (random.nextInt(129) - 64) / 64f;
                    sum[(int) ids[i] * dimension + j] += grads[i * dimension + j];
                }
            }
            idsOf.add(ids);
            gradsOf.add(grads);
        }
        ExecutorService pool = Executors.newFixedThreadPool(pushers);
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int p = 0; p < pushers; p++) {
                int first = p * batches;
                done.add(pool.submit(() -> {
                    for (int b = first; b < first + batches; b++) {
                        c.client().push("sgd", idsOf.get(b), gradsOf.get(b));
                    }
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(50, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        long[] all = new long[keys];
        for (int i = 0; i < keys; i++) {
            all[i] = i;
        }
        float[] rows = c.client().pull("sgd", all);
        for (int i = 0; i < rows.length; i++) {
            assertEquals(-0.5 * sum[i], rows[i], 1e-4, "weight " + i);
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void rowsComeBackInTheCallersOrderWithDuplicates(String provider) {
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), null);
        int d = 5;
        TableConfig t = TableConfig.of("emb", d, Optimizer.sgd(0.1)).withInitializer(Initializer.uniform(-1, 1, 11));
        c.client().createTable(t);
        long a = idOn(0, SERVERS, 1000);
        long b = idOn(1, SERVERS, 1000);
        long e = idOn(1, SERVERS, b + 1);
        long[] ids = {b, a, b, e, a, a, -7, e, b, Long.MAX_VALUE, Long.MIN_VALUE};
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(t);
            float[] expected = pullLocal(local, "emb", d, ids);
            assertBitsEqual(expected, c.client().pull("emb", ids), "pull");
            float[][] rows = c.client().pullRows("emb", ids);
            float[] into = new float[ids.length * d];
            c.client().pullAsync("emb", ids, into).join();
            assertBitsEqual(expected, into, "pull into");
            try (PsClient.PullView view = c.client().pullView("emb", ids).join()) {
                assertEquals(ids.length, view.count());
                for (int i = 0; i < ids.length; i++) {
                    float[] row = new float[d];
                    for (int j = 0; j < d; j++) {
                        row[j] = view.get(i, j);
                    }
                    assertBitsEqual(java.util.Arrays.copyOfRange(expected, i * d, (i + 1) * d), row, "view row " + i);
                    assertBitsEqual(row, rows[i], "pullRows row " + i);
                }
            }
            // A push with duplicates: one summed step per id on the server that owns it.
            float[] grads = new float[ids.length * d];
            for (int i = 0; i < grads.length; i++) {
                grads[i] = i * 0.25f - 3;
            }
            c.client().push("emb", ids, grads);
            pushLocal(local, "emb", d, ids, grads);
            assertBitsEqual(pullLocal(local, "emb", d, ids), c.client().pull("emb", ids), "after push");
            assertEquals(0, c.client().pull("emb", new long[0]).length);
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void pullsServedOnTheTransportThreadGiveTheSameRowsAndErrors(String provider) {
        List<ParameterServer> servers = new ArrayList<>();
        for (int i = 0; i < SERVERS; i++) {
            servers.add(ParameterServer.create(PsConfig.defaults()));
        }
        Cluster c = serve(provider, servers, null, true);
        int d = 8;
        TableConfig t = TableConfig.of("emb", d, Optimizer.adagrad(0.1)).withInitializer(Initializer.uniform(-1, 1, 5));
        c.client().createTable(t);
        // Large enough that a part goes by rendezvous on the fabric transports.
        long[] ids = new long[3000];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = (i * 7919L) % 2100 - 50;
        }
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(t);
            float[] expected = pullLocal(local, "emb", d, ids);
            assertBitsEqual(expected, c.client().pull("emb", ids), "pull");
            float[] grads = new float[ids.length * d];
            for (int i = 0; i < grads.length; i++) {
                grads[i] = (i % 13) * 0.5f - 3;
            }
            c.client().push("emb", ids, grads);
            pushLocal(local, "emb", d, ids, grads);
            expected = pullLocal(local, "emb", d, ids);
            assertBitsEqual(expected, c.client().pull("emb", ids), "pull after push");
            // The caller-thread pull of a range of the array, into a larger buffer.
            float[] into = new float[ids.length * d + 3];
            java.util.Arrays.fill(into, -9f);
            c.client().pull("emb", ids, 100, 500, into);
            assertBitsEqual(java.util.Arrays.copyOfRange(expected, 100 * d, 600 * d),
                    java.util.Arrays.copyOf(into, 500 * d), "pull of a range");
            assertEquals(-9f, into[500 * d], "wrote past the range's rows");
        }
        expect(PsException.Code.UNKNOWN_TABLE, () -> c.client().pull("nope", ids));
        expect(PsException.Code.UNKNOWN_TABLE, () -> c.client().pull("nope", ids, 0, 10, new float[10 * d]));
        expect(PsException.Code.LENGTH_MISMATCH, () -> c.client().pull("emb", ids, 0, 10, new float[10 * d - 1]));
        expect(PsException.Code.INVALID_ARGUMENT, () -> c.client().pull("emb", ids, 2990, 20, new float[20 * d]));
        byte[] name = PsDescriptor.nameBytes("emb");
        expect(PsException.Code.WRONG_SERVER, () -> raw(c.client(), 1, PsDescriptor.PULL,
                pull(name, d, new long[] {idOn(0, SERVERS, 77)})));
        expect(PsException.Code.WRONG_DIMENSION, () -> raw(c.client(), 0, PsDescriptor.PULL,
                pull(name, d + 1, new long[] {idOn(0, SERVERS, 77)})));
    }

    @ParameterizedTest
    @MethodSource("providers")
    void servingModeRejectsPushes(String provider, @TempDir Path dir) {
        long[] ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
        float[] before;
        {
            Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), dir);
            c.client().createTable(TableConfig.of("t", 4, Optimizer.adagrad(0.1)));
            c.client().push("t", ids, new float[ids.length * 4]);
            List<String> written = c.client().checkpoint();
            assertEquals(SERVERS, written.size());
            before = c.client().pull("t", ids);
            for (PsServer s : c.rpcServers()) {
                s.close();
            }
        }
        List<ParameterServer> serving = new ArrayList<>();
        for (int i = 0; i < SERVERS; i++) {
            serving.add(ParameterServer.serving(PsConfig.defaults(), dir.resolve("server-" + i)));
        }
        Cluster c = serve(provider, serving, dir);
        PsException e = expect(PsException.Code.READ_ONLY, () -> c.client().push("t", ids, new float[ids.length * 4]));
        assertTrue(e.getMessage().contains("read-only"), e.getMessage());
        expect(PsException.Code.READ_ONLY, () -> c.client().createTable(TableConfig.of("u", 4, Optimizer.sgd(1))));
        assertBitsEqual(before, c.client().pull("t", ids), "served rows");
        assertTrue(c.client().describeServers().stream().allMatch(ServerInfo::readOnly));
    }

    @ParameterizedTest
    @MethodSource("providers")
    void badInputIsRefusedAndChangesNothing(String provider) {
        int limitIds = 64;
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults().withRequestLimits(limitIds, 1 << 20), null);
        PsClient client = c.client();
        int d = 4;
        client.createTable(TableConfig.of("t", d, Optimizer.adagrad(0.1)).withInitializer(Initializer.uniform(0, 1, 1)));
        long[] ids = new long[40];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 31L;
        }
        client.push("t", ids, new float[ids.length * d]);
        float[] before = client.pull("t", ids);
        long rows = client.describe("t").rows();
        long own0 = idOn(0, SERVERS, 5000);
        long own1 = idOn(1, SERVERS, 5000);
        byte[] name = PsDescriptor.nameBytes("t");

        expect(PsException.Code.UNKNOWN_TABLE, () -> client.pull("nope", ids));
        expect(PsException.Code.UNKNOWN_TABLE, () -> client.describe("nope"));
        expect(PsException.Code.LENGTH_MISMATCH, () -> client.push("t", ids, new float[ids.length * d - 1]));
        expect(PsException.Code.TABLE_EXISTS, () -> client.createTable(TableConfig.of("t", d, Optimizer.sgd(1))));
        float[] nan = new float[ids.length * d];
        nan[ids.length * d - 1] = Float.NaN;
        expect(PsException.Code.INVALID_ARGUMENT, () -> client.push("t", ids, nan));
        // The client splits batches above the limits (RoutingTableTest); a server still refuses them.
        long[] manyOn0 = new long[8 * limitIds];
        for (int i = 0; i < manyOn0.length; i++) {
            manyOn0[i] = own0;
        }
        expect(PsException.Code.REQUEST_TOO_LARGE, () -> raw(client, 0, PsDescriptor.PULL, pull(name, d, manyOn0)));
        expect(PsException.Code.REQUEST_TOO_LARGE, () -> raw(client, 0, PsDescriptor.PUSH,
                push(name, d, manyOn0, new float[manyOn0.length * d])));

        // Hand-made requests: what a buggy or foreign client could send.
        expect(PsException.Code.WRONG_DIMENSION, () -> raw(client, 0, PsDescriptor.PUSH,
                push(name, d + 1, new long[] {own0}, new float[d + 1])));
        expect(PsException.Code.WRONG_DIMENSION, () -> raw(client, 0, PsDescriptor.PULL,
                pull(name, d + 1, new long[] {own0})));
        expect(PsException.Code.LENGTH_MISMATCH, () -> raw(client, 0, PsDescriptor.PUSH,
                java.util.Arrays.copyOf(push(name, d, new long[] {own0, own0 + 1}, new float[2 * d]),
                        push(name, d, new long[] {own0, own0 + 1}, new float[2 * d]).length - 4)));
        expect(PsException.Code.LENGTH_MISMATCH, () -> raw(client, 0, PsDescriptor.PULL,
                java.util.Arrays.copyOf(pull(name, d, new long[] {own0}), pull(name, d, new long[] {own0}).length + 8)));
        expect(PsException.Code.WRONG_SERVER, () -> raw(client, 0, PsDescriptor.PUSH,
                push(name, d, new long[] {own0, own1}, new float[2 * d])));
        expect(PsException.Code.WRONG_SERVER, () -> raw(client, 1, PsDescriptor.PULL, pull(name, d, new long[] {own0})));
        expect(PsException.Code.INVALID_ARGUMENT, () -> raw(client, 0, PsDescriptor.PULL, new byte[7]));
        byte[] badVersion = pull(name, d, new long[] {own0});
        badVersion[0] = 9;
        expect(PsException.Code.INVALID_ARGUMENT, () -> raw(client, 0, PsDescriptor.PULL, badVersion));
        byte[] negative = pull(name, d, new long[] {own0});
        MemorySegment.ofArray(negative).set(PsDescriptor.INT, PsDescriptor.COUNT_OFFSET, -1);
        expect(PsException.Code.INVALID_ARGUMENT, () -> raw(client, 0, PsDescriptor.PULL, negative));

        assertArrayEquals(before, client.pull("t", ids));
        assertEquals(rows, client.describe("t").rows(), "a refused request created rows");
    }

    private static void raw(PsClient client, int server, dev.ferry.rpc.RpcMethod method, byte[] body) {
        CompletableFuture<dev.ferry.rpc.RpcResponse> f = client.call(server, method, body.length,
                segment -> MemorySegment.copy(body, 0, segment, java.lang.foreign.ValueLayout.JAVA_BYTE, 0, body.length));
        PsClient.join(f).release();
    }

    private static byte[] pull(byte[] name, int dimension, long[] ids) {
        byte[] body = new byte[(int) PsDescriptor.pullBytes(name.length, ids.length)];
        MemorySegment s = MemorySegment.ofArray(body);
        int at = PsDescriptor.writeHeader(s, PsDescriptor.SPARSE, name, dimension, ids.length, 0);
        for (int i = 0; i < ids.length; i++) {
            s.set(PsDescriptor.LONG, at + 8L * i, ids[i]);
        }
        return body;
    }

    private static byte[] push(byte[] name, int dimension, long[] ids, float[] grads) {
        byte[] head = pull(name, dimension, ids);
        byte[] body = java.util.Arrays.copyOf(head, head.length + grads.length * 4);
        MemorySegment.copy(grads, 0, MemorySegment.ofArray(body), PsDescriptor.FLOAT, head.length, grads.length);
        return body;
    }
}
