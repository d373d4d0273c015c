package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.function.Executable;

/** Every bad request fails with its code and a clear message, and leaves the tables as they were. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class BadInputTest {

    private static final long[] IDS = {1, 2, 3, 4};

    private ParameterServer server;
    private SparseTable table;
    private DenseTensor dense;
    private Arena arena;

    @BeforeEach
    void setUp() {
        server = ParameterServer.create(PsConfig.defaults().withRequestLimits(100, 4_000));
        table = server.createTable(TableConfig.of("emb", 8, Optimizer.adam(0.1)).withInitializer(
                Initializer.normal(0, 1, 1)));
        dense = server.createDense(new DenseConfig("bias", 5, Optimizer.sgd(1), Initializer.zeros()));
        arena = Arena.ofConfined();
        table.apply(IDS, 0, 4, gradients(4, 8));
    }

    @AfterEach
    void tearDown() {
        arena.close();
        server.close();
    }

    @Test
    void unknownTable() {
        expect(PsException.Code.UNKNOWN_TABLE, "'nope'", () -> server.push("nope", 8, IDS, 0, 4, gradients(4, 8)));
        expect(PsException.Code.UNKNOWN_TABLE, "'nope'", () -> server.pull("nope", 8, IDS, 0, 4, arena.allocate(128)));
        expect(PsException.Code.UNKNOWN_TABLE, "'nope'", () -> server.dense("nope"));
        expect(PsException.Code.UNKNOWN_TABLE, "'emb'", () -> server.dense("emb"));
    }

    @Test
    void wrongDimension() {
        expect(PsException.Code.WRONG_DIMENSION, "dimension 8", () -> server.push("emb", 4, IDS, 0, 4, gradients(4, 4)));
        expect(PsException.Code.WRONG_DIMENSION, "4 floats per id", () -> table.apply(IDS, 0, 4, gradients(4, 4)));
        expect(PsException.Code.WRONG_DIMENSION, "dimension 8", () -> server.pull("emb", 16, IDS, 0, 4, arena.allocate(512)));
    }

    @Test
    void idsAndGradientsOfDifferentLengths() {
        expect(PsException.Code.LENGTH_MISMATCH, "need 128 bytes", () -> table.apply(IDS, 0, 4, arena.allocate(100)));
        expect(PsException.Code.LENGTH_MISMATCH, "need 128 bytes", () -> table.apply(IDS, 0, 4, arena.allocate(0)));
        expect(PsException.Code.LENGTH_MISMATCH, "need 96", () -> table.gather(IDS, 0, 3, arena.allocate(95)));
        expect(PsException.Code.LENGTH_MISMATCH, "5 weights", () -> dense.apply(arena.allocate(16)));
        expect(PsException.Code.LENGTH_MISMATCH, "need 12", () -> dense.read(0, 3, arena.allocate(8)));
    }

    @Test
    void requestsAboveTheLimits() {
        long[] many = new long[101];
        expect(PsException.Code.REQUEST_TOO_LARGE, "101 ids", () -> table.apply(many, 0, 101, gradients(101, 8)));
        long[] some = new long[126]; // 126 * 32 = 4,032 bytes > 4,000
        expect(PsException.Code.REQUEST_TOO_LARGE, "4032 bytes", () -> table.gather(some, 0, 126, arena.allocate(4032)));
    }

    @Test
    void rangesOutsideTheIdsAndReadOnlyOutputs() {
        expect(PsException.Code.INVALID_ARGUMENT, "outside", () -> table.apply(IDS, 2, 3, gradients(3, 8)));
        expect(PsException.Code.INVALID_ARGUMENT, "outside", () -> table.gather(IDS, -1, 1, arena.allocate(32)));
        expect(PsException.Code.INVALID_ARGUMENT, "read-only", () -> table.gather(IDS, 0, 1, arena.allocate(32).asReadOnly()));
        expect(PsException.Code.INVALID_ARGUMENT, "outside", () -> dense.read(3, 3, arena.allocate(12)));
    }

    @Test
    void nonFiniteGradients() {
        MemorySegment g = gradients(4, 8);
        g.set(RowLayout.FLOAT, (3 * 8 + 5) * 4L, Float.NaN);
        expect(PsException.Code.INVALID_ARGUMENT, "id 4 (element 5)", () -> table.apply(IDS, 0, 4, g));
        MemorySegment d = gradients(1, 5);
        d.set(RowLayout.FLOAT, 8, Float.POSITIVE_INFINITY);
        expect(PsException.Code.INVALID_ARGUMENT, "element 2", () -> dense.apply(d));
    }

    @Test
    void badConfigurationsAndNames() {
        expect(PsException.Code.TABLE_EXISTS, "'emb'", () -> server.createTable(TableConfig.of("emb", 8, Optimizer.sgd(1))));
        expect(PsException.Code.TABLE_EXISTS, "'emb'",
                () -> server.createDense(new DenseConfig("emb", 8, Optimizer.sgd(1), Initializer.zeros())));
        expect(PsException.Code.INVALID_ARGUMENT, "dimension", () -> TableConfig.of("x", 0, Optimizer.sgd(1)));
        expect(PsException.Code.INVALID_ARGUMENT, "shards", () -> TableConfig.of("x", 1, Optimizer.sgd(1)).withShards(3));
        expect(PsException.Code.INVALID_ARGUMENT, "learningRate", () -> Optimizer.sgd(-1));
        expect(PsException.Code.INVALID_ARGUMENT, "beta1", () -> new Optimizer.Adam(0.1, 1.0, 0.9, 1e-8));
        expect(PsException.Code.INVALID_ARGUMENT, "low < high", () -> Initializer.uniform(1, 1, 0));
        expect(PsException.Code.INVALID_ARGUMENT, "checkpointsKept", () -> PsConfig.defaults().withCheckpointsKept(1));
    }

    @Test
    void closedServer() {
        server.close();
        expect(PsException.Code.CLOSED, "closed", () -> server.table("emb"));
        expect(PsException.Code.CLOSED, "closed", () -> table.gather(IDS, 0, 1, arena.allocate(32)));
        expect(PsException.Code.CLOSED, "closed", () -> dense.apply(gradients(1, 5)));
    }

    /** Runs a bad request and checks its code, its message, and that no row or tensor changed. */
    private void expect(PsException.Code code, String inMessage, Executable bad) {
        boolean closed = code == PsException.Code.CLOSED;
        List<byte[]> before = closed ? List.of() : state();
        long rowsBefore = table.rows();
        PsException e = assertThrows(PsException.class, bad);
        assertEquals(code, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains(inMessage), "'" + e.getMessage() + "' should say " + inMessage);
        if (!closed) {
            assertEquals(rowsBefore, table.rows());
            List<byte[]> after = state();
            for (int i = 0; i < before.size(); i++) {
                assertArrayEquals(before.get(i), after.get(i), "state changed by a refused request");
            }
        }
    }

    private List<byte[]> state() {
        List<byte[]> rows = new ArrayList<>();
        for (long id : IDS) {
            rows.add(table.rawRow(id));
        }
        rows.add(dense.rawRow());
        return rows;
    }

    private MemorySegment gradients(int count, int dimension) {
        MemorySegment g = arena.allocate((long) count * dimension * Float.BYTES);
        for (int i = 0; i < count * dimension; i++) {
            g.set(RowLayout.FLOAT, 4L * i, 0.01f * (i % 13 - 6));
        }
        return g;
    }
}
