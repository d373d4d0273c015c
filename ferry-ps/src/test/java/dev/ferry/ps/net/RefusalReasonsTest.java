package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletionException;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;

/**
 * Refusals that no other test produced, each with the code and the reason a caller acts on: a
 * dense range or length the tensor does not have, table kinds, optimizers, initializers and
 * admissions a server does not know, moves and replication a member is not part of, malformed
 * export requests, a member asked before its first routing table; and on the client, a sparse
 * call on a dense tensor and the other way round, and gradients or an output of the wrong
 * length. Every refusal on the wire is counted once as a handler error; the server keeps serving.
 */
class RefusalReasonsTest extends PsNetTestBase {

    private static final int DIM = 4;
    private static final int LENGTH = 16;
    private static final byte[] D = "d".getBytes(StandardCharsets.UTF_8);


    @ParameterizedTest(name = "{0}")
    @MethodSource("providers")
    void everyRefusalCarriesItsCodeAndReason(String provider) throws Exception {
        Member m = exportingMember(provider, DIM, LENGTH);
        ParameterServer ps = m.ps();
        PsServer server = m.server();
        String address = m.address();
        ParameterServer unrouted = ParameterServer.create(PsConfig.defaults());
        PsServer fresh = PsServer.openMember(unrouted, "n", null, rpc(), false);
        String freshAddress = fresh.listen(config(provider));
        track(unrouted, fresh);
        PsClient client = client(provider, List.of(address));
        long[] ids = {3, 4};
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, 0.25f);
        client.push("t", ids, g);
        float[] rows = client.pull("t", ids);

        List<Case> cases = cases();
        long handlerErrors = server.rpcServer().counters().handlerErrors();
        try (RpcClient raw = RpcClient.open(rpc(), config(provider))) {
            RpcChannel c = raw.channel(address);
            for (Case k : cases) {
                check(k, refused(c, k));
            }
            PsException e = refused(raw.channel(freshAddress), new Case("SLOT_TABLE", PsDescriptor.SLOT_TABLE,
                    new byte[0], null, null));
            assertEquals(PsException.Code.WRONG_SERVER, e.code());
            assertTrue(e.getMessage().contains("member n has no routing table yet"), e.getMessage());
        }
        assertEquals(cases.size(), server.rpcServer().counters().handlerErrors() - handlerErrors,
                "handler errors counted");

        // The client's own checks, before or after asking the servers.
        PsException e = expect(PsException.Code.UNKNOWN_TABLE, () -> client.pullDense("t"));
        assertTrue(e.getMessage().contains("'t' is a sparse table of dimension 4, not a dense tensor"), e::getMessage);
        e = expect(PsException.Code.UNKNOWN_TABLE, () -> client.pull("d", ids));
        assertTrue(e.getMessage().contains("'d' is not a sparse table"), e::getMessage);
        e = expect(PsException.Code.LENGTH_MISMATCH, () -> client.pushDense("d", new float[3]));
        assertTrue(e.getMessage().contains("tensor 'd' has 16 weights; got 3 gradients"), e::getMessage);
        CompletionException async = assertThrows(CompletionException.class,
                () -> client.pullAsync("t", ids, new float[ids.length * DIM - 1]).join());
        assertTrue(async.getCause() instanceof PsException p && p.code() == PsException.Code.LENGTH_MISMATCH
                && p.getMessage().contains("out holds 7 floats; 2 rows of dimension 4 need 8"), async::toString);
        e = expect(PsException.Code.INVALID_ARGUMENT, () -> PsClient.connect(rpc(), config(provider), List.of()));
        assertTrue(e.getMessage().contains("no server addresses"), e::getMessage);

        // Nothing changed; the server still serves.
        assertEquals(List.of("d", "t"), ps.stats().stream().map(s -> s.name()).sorted().toList());
        assertArrayEquals(rows, client.pull("t", ids));
        assertArrayEquals(new float[LENGTH], client.pullDense("d"));
    }

    private static void check(Case k, PsException e) {
        assertEquals(k.code(), e.code(), () -> k.what() + ": " + e.getMessage());
        assertTrue(e.getMessage().contains(k.reason()), () -> k.what() + ": " + e.getMessage());
    }

    private static List<Case> cases() {
        List<Case> cases = new ArrayList<>();
        byte[] densePull = new byte[PsDescriptor.payloadOffset(D.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(densePull), PsDescriptor.DENSE, D, LENGTH, 8, 10);
        cases.add(new Case("DENSE_PULL past the tensor's end", PsDescriptor.DENSE_PULL, densePull,
                PsException.Code.INVALID_ARGUMENT, "range [10, +8) is outside tensor 'd' of length 16"));
        byte[] wrongLength = new byte[PsDescriptor.payloadOffset(D.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(wrongLength), PsDescriptor.DENSE, D, LENGTH - 1, 8, 0);
        cases.add(new Case("DENSE_PULL of another length", PsDescriptor.DENSE_PULL, wrongLength,
                PsException.Code.WRONG_DIMENSION, "tensor 'd' has length 16; the request says 15"));

        byte[] u = "u".getBytes(StandardCharsets.UTF_8);
        int payload = PsDescriptor.payloadOffset(u.length);
        byte[] kind = create(u);
        kind[PsDescriptor.KIND_OFFSET] = 7;
        cases.add(new Case("CREATE_TABLE of an unknown kind", PsDescriptor.CREATE_TABLE, kind,
                PsException.Code.INVALID_ARGUMENT, "unknown table kind 7"));
        byte[] optimizer = create(u);
        MemorySegment.ofArray(optimizer).set(PsDescriptor.INT, payload, 99);
        cases.add(new Case("CREATE_TABLE with an unknown optimizer", PsDescriptor.CREATE_TABLE, optimizer,
                PsException.Code.INVALID_ARGUMENT, "unknown optimizer kind 99"));
        byte[] initializer = create(u);
        MemorySegment.ofArray(initializer).set(PsDescriptor.INT, payload + 4, 98);
        cases.add(new Case("CREATE_TABLE with an unknown initializer", PsDescriptor.CREATE_TABLE, initializer,
                PsException.Code.INVALID_ARGUMENT, "unknown initializer kind 98"));
        byte[] admission = create(u);
        MemorySegment.ofArray(admission).set(PsDescriptor.INT, payload + PsDescriptor.CREATE_BODY + 4, 9);
        cases.add(new Case("CREATE_TABLE with an unknown admission", PsDescriptor.CREATE_TABLE, admission,
                PsException.Code.INVALID_ARGUMENT, "unknown admission kind 9"));

        byte[] noGroups = new byte[PsDescriptor.HEADER + 8];
        PsDescriptor.writeHeader(MemorySegment.ofArray(noGroups), PsDescriptor.SPARSE, new byte[0], 0, 0, 0);
        cases.add(new Case("MOVE_BEGIN of no group", PsDescriptor.MOVE_BEGIN, noGroups,
                PsException.Code.INVALID_ARGUMENT, "a move of 0 groups"));
        byte[] badGroup = new byte[PsDescriptor.HEADER + 8];
        MemorySegment b = MemorySegment.ofArray(badGroup);
        PsDescriptor.writeHeader(b, PsDescriptor.SPARSE, new byte[0], 0, 1, 0);
        b.set(PsDescriptor.INT, PsDescriptor.HEADER, RoutingTable.GROUPS);
        cases.add(new Case("MOVE_BEGIN of a group that does not exist", PsDescriptor.MOVE_BEGIN, badGroup,
                PsException.Code.INVALID_ARGUMENT, "group " + RoutingTable.GROUPS + " is outside [0, "
                        + RoutingTable.GROUPS + ")"));
        byte[] dedupe = new byte[PsDescriptor.HEADER];
        MemorySegment dd = MemorySegment.ofArray(dedupe);
        PsDescriptor.writeHeader(dd, PsDescriptor.SPARSE, new byte[0], 0, 0, 0);
        PsDescriptor.stamp(dd, 0, 77);
        cases.add(new Case("MOVE_DEDUPE of a move not received", ReplicationDescriptor.MOVE_DEDUPE, dedupe,
                PsException.Code.INVALID_ARGUMENT, "move 77 is not being received here"));
        byte[] t = "t".getBytes(StandardCharsets.UTF_8);
        byte[] replicate = new byte[PsDescriptor.payloadOffset(t.length)];
        PsDescriptor.writeHeader(MemorySegment.ofArray(replicate), PsDescriptor.SPARSE, t, DIM, -1, 1);
        cases.add(new Case("REPLICATE of a negative row count", ReplicationDescriptor.REPLICATE, replicate,
                PsException.Code.INVALID_ARGUMENT, "REPLICATE of -1 rows in 1 groups"));
        byte[] moveDense = new byte[PsDescriptor.payloadOffset(D.length) + 8];
        PsDescriptor.writeHeader(MemorySegment.ofArray(moveDense), PsDescriptor.SPARSE, D, LENGTH, 1, 0);
        cases.add(new Case("MOVE_DENSE of a sparse kind", DenseMove.MOVE_DENSE, moveDense,
                PsException.Code.INVALID_ARGUMENT, "a MOVE_DENSE carries one dense tensor"));
        byte[] replicateDense = new byte[PsDescriptor.payloadOffset(D.length) + 8];
        PsDescriptor.writeHeader(MemorySegment.ofArray(replicateDense), PsDescriptor.DENSE, D, LENGTH, 1, 2);
        cases.add(new Case("REPLICATE_DENSE in two groups", DenseReplication.REPLICATE_DENSE, replicateDense,
                PsException.Code.INVALID_ARGUMENT, "a REPLICATE_DENSE carries one dense tensor in one group"));

        cases.add(new Case("EXPORT_ROWS without a name", ExportDescriptor.EXPORT_ROWS,
                new byte[ExportDescriptor.rowsRequestBytes(1)], PsException.Code.INVALID_ARGUMENT,
                "EXPORT_ROWS: a table name of 0 bytes is outside [1, 65535]"));
        byte[] flags = new byte[ExportDescriptor.rowsRequestBytes(1)];
        MemorySegment f = MemorySegment.ofArray(flags);
        f.set(PsDescriptor.INT, 32, 1);
        f.set(PsDescriptor.INT, 36, 64);
        f.set(PsDescriptor.INT, 40, 1);
        flags[ExportDescriptor.ROWS_HEADER] = 't';
        cases.add(new Case("EXPORT_ROWS with unknown flags", ExportDescriptor.EXPORT_ROWS, flags,
                PsException.Code.INVALID_ARGUMENT, "EXPORT_ROWS: unknown flags 64"));
        cases.add(new Case("EXPORT_DENSE shorter than its header", ExportDescriptor.EXPORT_DENSE, new byte[10],
                PsException.Code.LENGTH_MISMATCH, "an EXPORT_DENSE request takes at least "
                        + ExportDescriptor.DENSE_HEADER + " bytes; this one has 10"));
        byte[] negative = new byte[ExportDescriptor.DENSE_HEADER];
        MemorySegment.ofArray(negative).set(PsDescriptor.INT, 24, -1);
        cases.add(new Case("EXPORT_DENSE with a negative name length", ExportDescriptor.EXPORT_DENSE, negative,
                PsException.Code.INVALID_ARGUMENT, "EXPORT_DENSE: a name of -1 bytes is outside [0, 65535]"));
        return cases;
    }

    private static byte[] create(byte[] name) {
        byte[] body = new byte[PsDescriptor.createBytes(name.length)];
        PsDescriptor.writeCreate(MemorySegment.ofArray(body), name, TableConfig.of("u", DIM, Optimizer.sgd(1)));
        return body;
    }
}
