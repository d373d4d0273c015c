package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;

/**
 * A truncated request to every method a cluster member serves (client methods, server-to-server
 * moves and replication, the export) is refused with the code and the reason a caller can act
 * on, is counted as a handler error on the server and a remote error on the client, changes
 * nothing, and leaves the server serving: on every transport.
 */
class TruncatedRequestTest extends PsNetTestBase {

    private static final int DIM = 4;
    private static final int LENGTH = 16;
    private static final byte[] T = "t".getBytes(StandardCharsets.UTF_8);
    private static final byte[] D = "d".getBytes(StandardCharsets.UTF_8);


    @ParameterizedTest(name = "{0}")
    @MethodSource("providers")
    void everyMethodRefusesATruncatedRequestWithItsReasonAndKeepsServing(String provider) throws Exception {
        Member m = exportingMember(provider, DIM, LENGTH);
        ParameterServer ps = m.ps();
        PsServer server = m.server();
        String address = m.address();
        PsClient client = client(provider, List.of(address));
        long[] ids = {3, 1_000_003, -7};
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, 0.5f);
        client.push("t", ids, g);
        float[] before = client.pull("t", ids);
        float[] denseBefore = client.pullDense("d");
        long rowsBefore = ps.table("t").rows();

        long rowBytes = RowTransfer.rowBytes(ps.table("t"));
        List<Case> cases = cases(rowBytes);
        long handlerErrors = server.rpcServer().counters().handlerErrors();
        try (RpcClient raw = RpcClient.open(rpc(), config(provider))) {
            RpcChannel c = raw.channel(address);
            long remoteErrors = raw.counters().remoteErrors();
            for (Case k : cases) {
                PsException e = refused(c, k);
                assertEquals(k.code(), e.code(), () -> k.what() + ": " + e.getMessage());
                assertTrue(e.getMessage().contains(k.reason()), () -> k.what() + ": " + e.getMessage());
            }
            assertEquals(cases.size(), raw.counters().remoteErrors() - remoteErrors, "remote errors counted");
        }
        assertEquals(cases.size(), server.rpcServer().counters().handlerErrors() - handlerErrors,
                "handler errors counted");

        // Nothing changed, and the server still serves pulls and pushes.
        assertEquals(rowsBefore, ps.table("t").rows());
        assertEquals(List.of("t"), ps.stats().stream().filter(s -> !s.name().equals("d")).map(s -> s.name()).toList());
        assertArrayEquals(before, client.pull("t", ids));
        assertArrayEquals(denseBefore, client.pullDense("d"));
        client.push("t", ids, g);
        float[] after = client.pull("t", ids);
        for (int i = 0; i < after.length; i++) {
            assertEquals(before[i] - 0.5f, after[i], 0f, "weight " + i + " after one more SGD step");
        }
    }

    private static List<Case> cases(long rowBytes) {
        List<Case> cases = new ArrayList<>();
        long[] ids = {3, 4, 5};
        byte[] pull = new byte[(int) PsDescriptor.pullBytes(T.length, ids.length)];
        MemorySegment p = MemorySegment.ofArray(pull);
        PsDescriptor.writeHeader(p, PsDescriptor.SPARSE, T, DIM, ids.length, 0);
        cases.add(new Case("PULL cut in its header", PsDescriptor.PULL, Arrays.copyOf(pull, 31),
                PsException.Code.INVALID_ARGUMENT, "shorter than the 32-byte header"));
        cases.add(new Case("PULL cut in its name", PsDescriptor.PULL, Arrays.copyOf(pull, PsDescriptor.HEADER + 1),
                PsException.Code.INVALID_ARGUMENT, "too short for its 1-byte name"));
        cases.add(new Case("PULL cut in its ids", PsDescriptor.PULL, Arrays.copyOf(pull, pull.length - 1),
                PsException.Code.LENGTH_MISMATCH, "a PULL of 3 entries"));
        byte[] push = new byte[(int) PsDescriptor.pushBytes(T.length, ids.length, DIM)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(push), PsDescriptor.SPARSE, T, DIM, ids.length, 0);
        cases.add(new Case("PUSH cut in its gradients", PsDescriptor.PUSH, Arrays.copyOf(push, push.length - 4),
                PsException.Code.LENGTH_MISMATCH, "a PUSH of 3 entries"));
        byte[] densePull = new byte[PsDescriptor.payloadOffset(D.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(densePull), PsDescriptor.DENSE, D, LENGTH, LENGTH, 0);
        cases.add(new Case("DENSE_PULL cut in its name", PsDescriptor.DENSE_PULL,
                Arrays.copyOf(densePull, densePull.length - 1), PsException.Code.INVALID_ARGUMENT,
                "too short for its 1-byte name"));
        byte[] densePush = new byte[PsDescriptor.payloadOffset(D.length) + LENGTH * Float.BYTES];
        PsDescriptor.writeHeader(MemorySegment.ofArray(densePush), PsDescriptor.DENSE, D, LENGTH, LENGTH, 0);
        cases.add(new Case("DENSE_PUSH cut in its gradients", PsDescriptor.DENSE_PUSH,
                Arrays.copyOf(densePush, densePush.length - 4), PsException.Code.LENGTH_MISMATCH,
                "a DENSE_PUSH of 16 entries"));
        byte[] u = "u".getBytes(StandardCharsets.UTF_8);
        byte[] create = new byte[PsDescriptor.createBytes(u.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(create), u, TableConfig.of("u", DIM, Optimizer.sgd(1)));
        cases.add(new Case("CREATE_TABLE cut in its body", PsDescriptor.CREATE_TABLE,
                Arrays.copyOf(create, create.length - 8), PsException.Code.LENGTH_MISMATCH,
                "a CREATE_TABLE request with a 1-byte name"));
        byte[] describe = new byte[PsDescriptor.payloadOffset(T.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(describe), PsDescriptor.SPARSE, T, 0, 0, 0);
        cases.add(new Case("DESCRIBE cut in its name", PsDescriptor.DESCRIBE, Arrays.copyOf(describe, 33),
                PsException.Code.INVALID_ARGUMENT, "too short for its 1-byte name"));

        byte[] begin = new byte[PsDescriptor.HEADER];
        PsDescriptor.writeHeader(MemorySegment.ofArray(begin), PsDescriptor.SPARSE, new byte[0], 0, 2, 0);
        cases.add(new Case("MOVE_BEGIN without its groups", PsDescriptor.MOVE_BEGIN, begin,
                PsException.Code.LENGTH_MISMATCH, "a MOVE_BEGIN of 32 bytes is too short for 2 groups"));
        byte[] rows = new byte[(int) (PsDescriptor.payloadOffset(T.length) + 2 * rowBytes)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(rows), PsDescriptor.SPARSE, T, DIM, 2, 0);
        cases.add(new Case("MOVE_ROWS cut in its rows", PsDescriptor.MOVE_ROWS,
                Arrays.copyOf(rows, (int) (rows.length - rowBytes)), PsException.Code.LENGTH_MISMATCH,
                "MOVE_ROWS of 2 rows of " + rowBytes + " bytes"));
        byte[] dedupe = new byte[PsDescriptor.HEADER + 2 * ReplicationDescriptor.GROUP_ENTRY];
        PsDescriptor.writeHeader(MemorySegment.ofArray(dedupe), PsDescriptor.SPARSE, new byte[0], 0, 2, 0);
        cases.add(new Case("MOVE_DEDUPE cut in its entries", ReplicationDescriptor.MOVE_DEDUPE,
                Arrays.copyOf(dedupe, dedupe.length - ReplicationDescriptor.GROUP_ENTRY),
                PsException.Code.LENGTH_MISMATCH, "MOVE_DEDUPE of 2 entries"));
        byte[] replicate = new byte[(int) (PsDescriptor.payloadOffset(T.length) + ReplicationDescriptor.GROUP_ENTRY
                + rowBytes)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(replicate), PsDescriptor.SPARSE, T, DIM, 1, 1);
        cases.add(new Case("REPLICATE cut in its row", ReplicationDescriptor.REPLICATE,
                Arrays.copyOf(replicate, replicate.length - 8), PsException.Code.LENGTH_MISMATCH,
                "REPLICATE of 1 rows of " + rowBytes + " bytes and 1 groups"));
        byte[] moveDense = new byte[PsDescriptor.payloadOffset(D.length) + 4];
        PsDescriptor.writeHeader(MemorySegment.ofArray(moveDense), PsDescriptor.DENSE, D, LENGTH, 1, 0);
        cases.add(new Case("MOVE_DENSE cut before its create body", DenseMove.MOVE_DENSE, moveDense,
                PsException.Code.LENGTH_MISMATCH, "its create body's length"));
        byte[] replicateDense = new byte[PsDescriptor.payloadOffset(D.length) + ReplicationDescriptor.GROUP_ENTRY + 4];
        PsDescriptor.writeHeader(MemorySegment.ofArray(replicateDense), PsDescriptor.DENSE, D, LENGTH, 1, 1);
        cases.add(new Case("REPLICATE_DENSE cut before its create body", DenseReplication.REPLICATE_DENSE,
                replicateDense, PsException.Code.LENGTH_MISMATCH, "its create body's length"));

        cases.add(new Case("EXPORT_TABLES cut", ExportDescriptor.EXPORT_TABLES,
                new byte[ExportDescriptor.TABLES_REQUEST - 1], PsException.Code.INVALID_ARGUMENT,
                "EXPORT_TABLES request is 8 bytes"));
        byte[] exportRows = new byte[ExportDescriptor.rowsRequestBytes(T.length) - 1];
        MemorySegment.ofArray(exportRows).set(PsDescriptor.INT, 40, T.length);
        cases.add(new Case("EXPORT_ROWS cut in its name", ExportDescriptor.EXPORT_ROWS, exportRows,
                PsException.Code.LENGTH_MISMATCH, "an EXPORT_ROWS request with a name of 1 bytes takes"));
        byte[] exportDense = new byte[ExportDescriptor.denseRequestBytes(D.length) - 1];
        MemorySegment.ofArray(exportDense).set(PsDescriptor.INT, 24, D.length);
        cases.add(new Case("EXPORT_DENSE cut in its name", ExportDescriptor.EXPORT_DENSE, exportDense,
                PsException.Code.LENGTH_MISMATCH, "an EXPORT_DENSE request with a name of 1 bytes takes"));
        cases.add(new Case("EXPORT_CHECKPOINT cut", ExportDescriptor.EXPORT_CHECKPOINT,
                new byte[ExportDescriptor.CHECKPOINT_REQUEST - 1], PsException.Code.INVALID_ARGUMENT,
                "EXPORT_CHECKPOINT request is"));
        return cases;
    }
}
