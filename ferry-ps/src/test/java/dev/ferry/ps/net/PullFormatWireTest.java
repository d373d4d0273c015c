package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.PullFormat;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Compressed pulls end to end: the client gets exactly what the server's encoder and its own
 * decoder make of the stored f32 rows (the per-element bounds are {@code PullFormatTest}'s), the
 * wire carries the format's bytes and no more, the table's default travels to clients that did
 * not create it, and a part split to the request limits decodes the same.
 */
class PullFormatWireTest extends PsNetTestBase {

    private static final int SERVERS = 2;
    private static final int D = 16;

    private static TableConfig table(String name) {
        return TableConfig.of(name, D, Optimizer.sgd(0.5)).withInitializer(Initializer.normal(0, 3, 5));
    }

    /** What a pull in {@code format} must answer: the local f32 rows, encoded and decoded. */
    private static float[] expected(ParameterServer local, String table, long[] ids, PullFormat format) {
        float[] f32 = new float[ids.length * D];
        local.pull(table, D, ids, 0, ids.length, MemorySegment.ofArray(f32));
        byte[] wire = new byte[(int) format.rowsBytes(ids.length, D)];
        format.encode(MemorySegment.ofArray(f32), 0, ids.length, D, MemorySegment.ofArray(wire), 0);
        float[] out = new float[f32.length];
        for (int i = 0; i < ids.length; i++) {
            format.decodeRow(MemorySegment.ofArray(wire), i * format.rowBytes(D), D, MemorySegment.ofArray(out),
                    (long) i * D * Float.BYTES);
        }
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

    /** The same rows on a cluster and on a local server: created by pulls, then stepped by pushes. */
    private static void populate(PsClient client, ParameterServer local, String table, long[] ids) {
        SplittableRandom random = new SplittableRandom(9);
        float[] grads = new float[ids.length * D];
        for (int i = 0; i < grads.length; i++) {
            grads[i] = (float) random.nextGaussian() * (i % 7 == 0 ? 1000 : 1);
        }
        client.push(table, ids, grads);
        local.push(table, D, ids, 0, ids.length, MemorySegment.ofArray(grads));
    }

    private static long[] ids(int n, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        long[] ids = new long[n];
        for (int i = 0; i < n; i++) {
            ids[i] = random.nextLong();
        }
        return ids;
    }

    @ParameterizedTest
    @MethodSource("providers")
    void everyFormatDecodesTheServersEncodingAndTheWireCarriesItsBytes(String provider) {
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), null);
        long[] distinct = ids(200, 1);
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            c.client().createTable(table("emb"));
            local.createTable(table("emb"));
            populate(c.client(), local, "emb", distinct);
            long[] withDuplicates = {distinct[3], distinct[0], distinct[3], 77, distinct[199], 77, distinct[0]};
            long[] received = new long[PullFormat.values().length];
            for (PullFormat format : PullFormat.values()) {
                assertBitsEqual(expected(local, "emb", withDuplicates, format),
                        c.client().pull("emb", withDuplicates, format), format + " with duplicates");
                float[] into = new float[distinct.length * D + 5];
                c.client().pull("emb", distinct, 0, distinct.length, into, format);
                assertBitsEqual(expected(local, "emb", distinct, format), java.util.Arrays.copyOf(into, distinct.length * D),
                        format + " into the caller's array");
                float[] async = new float[distinct.length * D];
                c.client().pullAsync("emb", distinct, async, format).join();
                assertBitsEqual(expected(local, "emb", distinct, format), async, format + " async");
                received[format.ordinal()] = bytesOfOnePull(c.client(), distinct, format);
            }
            long f32 = received[PullFormat.F32.ordinal()];
            // The same requests and framing: the answers differ by the rows' bytes exactly.
            assertEquals(distinct.length * D * 2L, f32 - received[PullFormat.F16.ordinal()], "f16 saves half the rows");
            assertEquals(distinct.length * D * 2L, f32 - received[PullFormat.BF16.ordinal()], "bf16 saves half the rows");
            assertEquals(distinct.length * (D * 3L - 4), f32 - received[PullFormat.INT8.ordinal()],
                    "int8 sends a byte per weight and a scale per row");
        }
    }

    /**
     * Bytes the client receives for one pull of {@code ids} in {@code format}: the least of eight
     * tries (a credit message may ride along; under load it did in three tries in a row once).
     */
    private static long bytesOfOnePull(PsClient client, long[] ids, PullFormat format) {
        long least = Long.MAX_VALUE;
        for (int k = 0; k < 8; k++) {
            long before = client.rpcClient().primaryTransport().counters().bytesReceived();
            client.pull("emb", ids, format);
            least = Math.min(least, client.rpcClient().primaryTransport().counters().bytesReceived() - before);
        }
        return least;
    }

    @ParameterizedTest
    @MethodSource("providers")
    void theTablesDefaultFormatReachesEveryClientAndViewsStayExact(String provider) {
        Cluster c = cluster(provider, SERVERS, PsConfig.defaults(), null);
        long[] ids = ids(50, 2);
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            c.client().createTable(table("q").withPullFormat(PullFormat.INT8));
            local.createTable(table("q"));
            populate(c.client(), local, "q", ids);
            float[] int8 = expected(local, "q", ids, PullFormat.INT8);
            assertBitsEqual(int8, c.client().pull("q", ids), "the creator's default pull");
            PsClient other = client(provider, c.addresses());
            assertBitsEqual(int8, other.pull("q", ids), "another client's default pull (learnt by describe)");
            assertEquals(PullFormat.INT8, other.describeServers().get(0).tables().getFirst().pullFormat());
            assertBitsEqual(expected(local, "q", ids, PullFormat.F32), other.pull("q", ids, PullFormat.F32),
                    "an f32 pull of an int8 table");
            try (PsClient.PullView view = other.pullView("q", ids).join()) {
                float[] exact = expected(local, "q", ids, PullFormat.F32);
                for (int i = 0; i < ids.length; i++) {
                    for (int j = 0; j < D; j++) {
                        assertEquals(Float.floatToRawIntBits(exact[i * D + j]), Float.floatToRawIntBits(view.get(i, j)));
                    }
                }
            }
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void partsSplitToTheRequestLimitsDecodeTheSame(String provider) {
        PsConfig small = PsConfig.defaults().withRequestLimits(7, 1 << 20);
        Cluster c = cluster(provider, SERVERS, small, null);
        long[] ids = ids(40, 3);
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            c.client().createTable(table("s"));
            local.createTable(table("s"));
            for (int from = 0; from < ids.length; from += 5) {
                populate(c.client(), local, "s", java.util.Arrays.copyOfRange(ids, from, from + 5));
            }
            for (PullFormat format : PullFormat.values()) {
                assertBitsEqual(expected(local, "s", ids, format), c.client().pull("s", ids, format), format + " split");
            }
        }
    }

    @ParameterizedTest
    @MethodSource("providers")
    void anUnknownFormatIsRefused(String provider) {
        Cluster c = cluster(provider, 1, PsConfig.defaults(), null);
        c.client().createTable(table("u"));
        byte[] name = PsDescriptor.nameBytes("u");
        PsException e = expect(PsException.Code.INVALID_ARGUMENT, () -> PsClient.join(
                c.client().call(0, PsDescriptor.PULL, (int) PsDescriptor.pullBytes(name.length, 1), body -> {
                    int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, D, 1, 9);
                    body.set(PsDescriptor.LONG, at, 5L);
                })).release());
        assertEquals(true, e.getMessage().contains("pull format 9"), e.getMessage());
        assertEquals(0, c.servers().getFirst().table("u").rows(), "a refused pull creates no row");
    }
}
