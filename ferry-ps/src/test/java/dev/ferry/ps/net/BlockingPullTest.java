package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.SplittableRandom;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Test;

/**
 * The caller-thread pull ({@link PsClient#pull(String, long[], int, int, float[])}): it plans in
 * a plan of its thread, re-planned batch after batch, and checks each part's answer on the
 * waiting thread. Batches of every shape in a row on one thread, and failures in the middle of
 * them, must give exactly the rows of a local server, release every receive buffer (the base
 * class checks at the end), and leave the next pull right.
 */
class BlockingPullTest extends PsNetTestBase {

    private static final int SERVERS = 2;
    private static final int DIMENSION = 6;

    private static TableConfig table(String name) {
        return TableConfig.of(name, DIMENSION, Optimizer.sgd(0.1)).withInitializer(Initializer.uniform(-1, 1, 3));
    }

    private static float[] pullLocal(ParameterServer local, String table, long[] ids, int offset, int count) {
        float[] out = new float[count * DIMENSION];
        local.pull(table, DIMENSION, ids, offset, count, MemorySegment.ofArray(out));
        return out;
    }

    private static void assertBitsEqual(float[] expected, float[] actual, int floats, String what) {
        for (int i = 0; i < floats; i++) {
            if (Float.floatToRawIntBits(expected[i]) != Float.floatToRawIntBits(actual[i])) {
                throw new AssertionError(what + ": element " + i + " is " + actual[i] + ", expected " + expected[i]);
            }
        }
    }

    @Test
    void batchesOfEveryShapeInARowOnOneThreadGiveTheLocalRows() {
        Cluster c = cluster("local", SERVERS, PsConfig.defaults(), null);
        c.client().createTable(table("emb"));
        SplittableRandom random = new SplittableRandom(5);
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(table("emb"));
            // Large (its parts scattered as answered), small, empty, one id, all duplicates, one
            // server only, then large again: the plan's arrays grow, are re-used shorter, and grow again.
            int[] sizes = {3000, 17, 0, 1, 64, 900, 5, 4000, 2, 2500, 2048};
            float[] out = new float[4000 * DIMENSION + 1];
            for (int round = 0; round < sizes.length; round++) {
                int n = sizes[round];
                long[] ids = new long[n + 3];
                for (int i = 0; i < ids.length; i++) {
                    ids[i] = switch (round % 3) {
                        case 0 -> random.nextLong(2 * n + 1) - 10;
                        case 1 -> 42;
                        default -> idOn(0, SERVERS, random.nextLong(1 << 20));
                    };
                }
                Arrays.fill(out, Float.NaN);
                c.client().pull("emb", ids, 3, n, out);
                assertBitsEqual(pullLocal(local, "emb", ids, 3, n), out, n * DIMENSION, "batch " + round + " of " + n);
                assertTrue(Float.isNaN(out[n * DIMENSION]), "batch " + round + " wrote past its rows");
            }
        }
    }

    @Test
    void aPartRefusedMidBatchFailsThePullAndTheNextPullIsRight() {
        Cluster c = cluster("local", SERVERS, PsConfig.defaults(), null);
        // Room for 40 rows per server: a batch of 200 new ids fills it and a part is refused.
        c.client().createTable(table("small").withMaxRows(40));
        long[] first = new long[30];
        for (int i = 0; i < first.length; i++) {
            first[i] = i;
        }
        float[] out = new float[3000 * DIMENSION];
        c.client().pull("small", first, 0, first.length, out);
        float[] before = Arrays.copyOf(out, first.length * DIMENSION);
        // A batch waited for as a whole, and one big enough to be scattered part by part as answered.
        for (int size : new int[] {200, SparseCalls.SCATTER_AS_ANSWERED_IDS + 500}) {
            long[] many = new long[size];
            for (int i = 0; i < many.length; i++) {
                many[i] = 1000 + i;
            }
            PsException full = assertThrows(PsException.class,
                    () -> c.client().pull("small", many, 0, many.length, out));
            assertEquals(PsException.Code.TABLE_FULL, full.code(), full.getMessage());
            assertTrue(full.getMessage().contains("server"), "names the server: " + full.getMessage());
        }
        // The same thread again, with a shorter batch of rows that exist: exactly the first answer.
        Arrays.fill(out, Float.NaN);
        c.client().pull("small", first, 0, first.length, out);
        assertBitsEqual(before, out, first.length * DIMENSION, "after the refusal");
        // And a range of it, duplicates included.
        long[] again = {29, 0, 29, 5, 0};
        c.client().pull("small", again, 1, 4, out);
        for (int k = 0; k < 4; k++) {
            int row = (int) again[1 + k];
            assertBitsEqual(Arrays.copyOfRange(before, row * DIMENSION, (row + 1) * DIMENSION),
                    Arrays.copyOfRange(out, k * DIMENSION, (k + 1) * DIMENSION), DIMENSION, "range row " + k);
        }
    }

    @Test
    void aBigBatchWithPartsAboveTheServersLimitsGivesTheLocalRows() {
        // Parts above 1,024 ids go in pieces, by id, where a part under it is one call: a big
        // batch scattered part by part as answered mixes both.
        Cluster c = cluster("local", SERVERS, PsConfig.defaults().withRequestLimits(1024, 1 << 20), null);
        c.client().createTable(table("emb"));
        try (ParameterServer local = ParameterServer.create(PsConfig.defaults())) {
            local.createTable(table("emb"));
            SplittableRandom random = new SplittableRandom(9);
            long[] mixed = new long[2100];
            long next0 = 0;
            long next1 = 0;
            for (int i = 0; i < mixed.length; i++) {
                // 2,000 ids of server 0 (above the limit) and 100 of server 1 (under it), shuffled.
                if (i % 21 == 20) {
                    mixed[i] = next1 = idOn(1, SERVERS, next1 + 1);
                } else {
                    mixed[i] = next0 = idOn(0, SERVERS, next0 + 1);
                }
            }
            long[] both = new long[3000]; // about 1,500 ids per server: both parts above the limit
            for (int i = 0; i < both.length; i++) {
                both[i] = random.nextLong(1 << 20);
            }
            float[] out = new float[3000 * DIMENSION];
            for (long[] ids : new long[][] {mixed, both, mixed}) {
                Arrays.fill(out, Float.NaN);
                c.client().pull("emb", ids, 0, ids.length, out);
                assertBitsEqual(pullLocal(local, "emb", ids, 0, ids.length), out, ids.length * DIMENSION,
                        "a batch of " + ids.length);
            }
        }
    }
}
