package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.DenseTensor;
import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;

/**
 * The live export on every transport ({@link #providers()}: shm, tcp, Netty and the in-JVM one):
 * a trainer pushes sparse rows and a dense tensor to a training server over the transport while
 * a serving server follows it over the same transport; rows are deleted on training mid-way.
 * Once training stops, serving holds exactly training's rows (byte for byte: ids, steps,
 * weights, optimizer state) and tensor, the deleted rows are gone, and a client of the serving
 * server reads the same values over the transport and is refused pushes, sparse and dense.
 */
class ExportTransportsTest extends ExportTestBase {

    private static final int ROWS = 2_000;
    private static final int BATCH = 250;
    private static final int DENSE = 512;
    private static final int DELETED = 25;

    @ParameterizedTest(name = "{0}")
    @MethodSource("providers")
    void servingEndsWithExactlyTrainingsRowsTensorAndDeletions(String provider) throws Exception {
        Training t = training(ParameterServer.create(PsConfig.defaults()), null, provider);
        Serving s = serving(provider);
        PsClient trainer = client(provider, List.of(t.address()));
        trainer.createTable(TableConfig.of("t", DIM, Optimizer.adagrad(0.1)));
        trainer.createDense(new DenseConfig("w", DENSE, Optimizer.sgd(0.5), Initializer.zeros()));
        SparseTable trained = t.ps().table("t");
        DenseTensor trainedDense = t.ps().dense("w");
        long[] ids = ids(ROWS, 7919);
        int steps = 0;
        try (DeltaFollower f = follow(s, t, provider)) {
            // First half: every id, while the follower polls.
            for (int at = 0; at < ROWS; at += BATCH) {
                step(trainer, Arrays.copyOfRange(ids, at, at + BATCH), steps++);
            }
            await(() -> equal(t.ps(), s.ps()), "serving caught up mid-training over " + provider);
            // Rows serving holds are deleted on training: their tombstones must travel.
            long[] deleted = Arrays.copyOfRange(ids, ROWS - DELETED, ROWS);
            for (long id : deleted) {
                assertTrue(ExportRows.evict(trained, id), "row " + id + " was stored");
            }
            // Second half: the first half of the ids only (none deleted is made again).
            for (int round = 0; round < 12; round++) {
                int at = (round % 4) * BATCH;
                step(trainer, Arrays.copyOfRange(ids, at, at + BATCH), steps++);
            }
            // Training has stopped.
            int totalSteps = steps;
            await(() -> equal(t.ps(), s.ps()) && denseEqual(trainedDense, s.ps(), totalSteps),
                    "serving equal to training after training stopped, over " + provider);
            long rounds = f.rounds();
            await(() -> f.rounds() >= rounds + 2, "two more polls");
            assertTrue(equal(t.ps(), s.ps()), "still equal two polls later");
            SparseTable served = s.ps().table("t");
            assertEquals(ROWS - DELETED, trained.rows());
            assertEquals(ROWS - DELETED, served.rows());
            for (long id : deleted) {
                assertEquals(-1, ExportRows.steps(served, id), "deleted row " + id + " on serving");
            }
            assertTrue(f.rowsDeleted() >= DELETED, "rows deleted on serving: " + f.rowsDeleted());
            assertEquals(totalSteps, s.ps().dense("w").steps());
            assertEquals(0, f.rejectedPages());
            assertEquals(0, f.failures(), () -> "failures: " + f.lastError());
        }
        // A client of the serving server reads training's values over the same transport.
        PsClient reader = client(provider, List.of(s.address()));
        long[] live = Arrays.copyOf(ids, ROWS - DELETED);
        float[] expected = new float[live.length * DIM];
        t.ps().pull("t", DIM, live, 0, live.length, MemorySegment.ofArray(expected));
        assertArrayEquals(expected, reader.pull("t", live));
        float[] dense = new float[DENSE];
        trainedDense.read(0, DENSE, MemorySegment.ofArray(dense));
        assertArrayEquals(dense, reader.pullDense("w"));
        PsNetTestBase.expect(PsException.Code.READ_ONLY, () -> reader.push("t", new long[] {ids[0]}, new float[DIM]));
        PsException e = PsNetTestBase.expect(PsException.Code.READ_ONLY, () -> reader.pushDense("w", new float[DENSE]));
        assertTrue(e.getMessage().contains("read-only (serving mode)"), e::getMessage);
        assertArrayEquals(dense, reader.pullDense("w"));
    }

    /** One training step over the wire: a push of {@code batch} and one of the dense tensor. */
    private static void step(PsClient trainer, long[] batch, int step) {
        float[] g = new float[batch.length * DIM];
        for (int i = 0; i < g.length; i++) {
            g[i] = ((i * 31 + step * 7) % 13 - 6) * 0.01f;
        }
        trainer.push("t", batch, g);
        float[] dg = new float[DENSE];
        for (int i = 0; i < DENSE; i++) {
            dg[i] = ((i + step) % 5 - 2) * 0.1f;
        }
        trainer.pushDense("w", dg);
    }

    private static boolean denseEqual(DenseTensor trained, ParameterServer serving, int steps) {
        DenseTensor served;
        try {
            served = serving.dense("w");
        } catch (PsException notYet) {
            return false;
        }
        float[] a = new float[DENSE];
        float[] b = new float[DENSE];
        trained.read(0, DENSE, MemorySegment.ofArray(a));
        served.read(0, DENSE, MemorySegment.ofArray(b));
        return served.steps() == steps && Arrays.equals(a, b);
    }
}
