package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A batch that spans two servers and holds one NaN or infinite gradient is refused whole, by the
 * client, before anything is sent: no server applies its part. (Each server checks only its own
 * part, so the one without the bad value used to apply it.) And an unknown table is named as such.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NonFiniteBatchTest extends PsNetTestBase {

    private static final int D = 4;

    @Test
    void aBatchWithANonFiniteGradientChangesNoServer() {
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        PsClient client = c.client();
        client.createTable(TableConfig.of("emb", D, Optimizer.sgd(0.5)).withInitializer(Initializer.uniform(0, 1, 5)));
        long[] ids = new long[16];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = idOn(i % 2, 2, 1000L * i); // alternately on server 0 and server 1
        }
        float[] before = client.pull("emb", ids);
        float[] bad = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY};
        // The bad value in a row of server 1, after rows of server 0, and the other way round.
        int[] positions = {ids.length - 1, ids.length - 2};
        for (float value : bad) {
            for (int position : positions) {
                float[] grads = new float[ids.length * D];
                java.util.Arrays.fill(grads, 1f);
                grads[position * D + 2] = value;
                String m = expect(PsException.Code.INVALID_ARGUMENT, () -> client.push("emb", ids, grads)).getMessage();
                float[] after = client.pull("emb", ids);
                for (int i = 0; i < before.length; i++) {
                    assertEquals(Float.floatToRawIntBits(before[i]), Float.floatToRawIntBits(after[i]), "row of id "
                            + ids[i / D] + " (server " + i / D % 2 + ") changed by a refused batch, element " + i % D);
                }
                assertTrue(m.contains("id " + ids[position]) && m.contains("position " + position)
                        && m.contains("element 2") && m.contains("'emb'") && m.contains(String.valueOf(value)), m);
            }
        }
        // A finite batch still goes through, to both servers.
        float[] ones = new float[ids.length * D];
        java.util.Arrays.fill(ones, 1f);
        client.push("emb", ids, ones);
        float[] stepped = client.pull("emb", ids);
        for (int i = 0; i < before.length; i++) {
            assertEquals(before[i] - 0.5f, stepped[i], 1e-6f, "element " + i);
        }
    }

    @Test
    void anUnknownTableIsNotCalledADenseTensor() {
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        c.client().createTable(TableConfig.of("emb", D, Optimizer.sgd(0.5)));
        PsException e = expect(PsException.Code.UNKNOWN_TABLE, () -> c.client().pull("nope", new long[] {1, 2}));
        assertTrue(e.getMessage().contains("no sparse table or dense tensor named 'nope'")
                && e.getMessage().contains("sparse tables: [emb]"), e.getMessage());
        e = expect(PsException.Code.UNKNOWN_TABLE, () -> c.client().push("nope", new long[] {1}, new float[D]));
        assertTrue(e.getMessage().contains("'nope'") && !e.getMessage().startsWith("no dense tensor"), e.getMessage());
    }
}
