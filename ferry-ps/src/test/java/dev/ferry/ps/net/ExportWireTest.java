package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.RowTransfer;
import dev.ferry.ps.Slots;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;

/**
 * The live export on the wire (tcp): a follower catches up with a training server and stays
 * equal; malformed requests are refused by the training server, and malformed pages by the
 * follower, each with a reason; an older row never replaces a newer one.
 */
class ExportWireTest extends PsNetTestBase {

    private static final int DIM = 4;

    private record Pair(ParameterServer training, PsServer trainingServer, String trainingAddress,
            ExportService export, ParameterServer serving, PsServer servingServer) {
    }

    private Pair open() {
        ParameterServer training = ParameterServer.create(PsConfig.defaults());
        PsServer ts = PsServer.open(training, 0, 1, null, rpc());
        ExportService export = ExportService.attach(ts);
        String address = ts.listen(config("tcp"));
        track(training, ts);
        ParameterServer serving = ParameterServer.follower(PsConfig.defaults());
        PsServer ss = PsServer.openMember(serving, "s", null, rpc(), false);
        String servingAddress = ss.listen(config("tcp"));
        track(serving, ss);
        ss.install(RoutingTable.of(1, List.of("s"), List.of(servingAddress), new int[RoutingTable.GROUPS]));
        return new Pair(training, ts, address, export, serving, ss);
    }

    private static void push(ParameterServer ps, long[] ids, float value) {
        float[] g = new float[ids.length * DIM];
        Arrays.fill(g, value);
        ps.push("t", DIM, ids, 0, ids.length, MemorySegment.ofArray(g));
    }

    private static float[] rows(ParameterServer ps, long[] ids) {
        float[] out = new float[ids.length * DIM];
        ps.pull("t", DIM, ids, 0, ids.length, MemorySegment.ofArray(out));
        return out;
    }

    private static void await(java.util.function.BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(10);
        }
    }

    @Test
    void aFollowerCatchesUpPagesThroughManyRowsAndStaysEqual() throws Exception {
        Pair p = open();
        p.training().createTable(TableConfig.of("t", DIM, Optimizer.adagrad(0.1)));
        long[] ids = new long[10_000];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 7919L - 30_000;
        }
        push(p.training(), ids, 1f); // stored before any follower: in the first poll, 3 pages
        try (DeltaFollower f = DeltaFollower.start(p.servingServer(), () -> List.of(p.trainingAddress()), rpc(),
                config("tcp"), 50)) {
            await(() -> Arrays.equals(rowsOrNull(p.serving(), ids), rows(p.training(), ids)), "the first catch-up");
            assertTrue(f.resyncs() >= 1);
            long applied = f.rowsApplied();
            assertTrue(applied >= ids.length, "applied " + applied);
            long[] some = Arrays.copyOf(ids, 100);
            for (int round = 0; round < 5; round++) {
                push(p.training(), some, round + 2f);
                await(() -> Arrays.equals(rowsOrNull(p.serving(), ids), rows(p.training(), ids)), "round " + round);
            }
            // Only the changed rows travel after the first poll (a poll may repeat a row, never the table).
            assertTrue(f.rowsApplied() + f.rowsOlder() - applied <= 5 * 2 * some.length,
                    "rows after the first poll: " + (f.rowsApplied() + f.rowsOlder() - applied));
            assertEquals(0, f.failures(), () -> "failures: " + f.lastError());
            assertEquals(1, f.resyncs());
            // Whole rows: the optimizer state came along (the serving copy is byte for byte training's).
            SparseTable served = p.serving().table("t");
            assertTrue(served.readOnly());
            assertTrue(p.export().rowsExported() >= ids.length);
            assertTrue(f.bytesReceived() > 0 && p.export().bytesExported() >= f.bytesReceived());
        }
        // The serving server refuses pushes.
        expect(PsException.Code.READ_ONLY, () -> push(p.serving(), new long[] {1}, 1f));
    }

    private static float[] rowsOrNull(ParameterServer ps, long[] ids) {
        try {
            return rows(ps, ids);
        } catch (PsException notYet) {
            return null;
        }
    }

    @Test
    void anOlderRowNeverReplacesANewerOne() {
        Pair p = open();
        p.training().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        p.serving().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        SparseTable t = p.training().table("t");
        long[] id = {42};
        long rowBytes = RowTransfer.rowBytes(t);
        MemorySegment old = MemorySegment.ofArray(new byte[(int) rowBytes]);
        MemorySegment newer = MemorySegment.ofArray(new byte[(int) rowBytes]);
        push(p.training(), id, 1f);
        RowTransfer.copy(t, id, 1, old);
        push(p.training(), id, 1f);
        RowTransfer.copy(t, id, 1, newer);
        SparseTable s = p.serving().table("t");
        assertEquals(1, RowTransfer.merge(s, newer));
        assertEquals(0, RowTransfer.merge(s, old), "a retried older delta is not applied");
        assertArrayEquals(new float[] {-2, -2, -2, -2}, rows(p.serving(), id));
        assertEquals(1, RowTransfer.merge(s, newer), "the same version again is harmless");
        assertArrayEquals(new float[] {-2, -2, -2, -2}, rows(p.serving(), id));
    }

    @Test
    void malformedRequestsAreRefusedWithAReason() throws Exception {
        Pair p = open();
        p.training().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        try (RpcClient client = RpcClient.open(rpc(), config("tcp"))) {
            RpcChannel c = client.channel(p.trainingAddress());
            PsException e = refused(c, ExportDescriptor.EXPORT_TABLES, new byte[3]);
            assertEquals(PsException.Code.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("EXPORT_TABLES request is 8 bytes"), e.getMessage());
            byte[] tablesRequest = new byte[ExportDescriptor.TABLES_REQUEST];
            tablesRequest[0] = ExportDescriptor.VERSION;
            long logId;
            long tick;
            try (RpcResponse r = c.call(ExportDescriptor.EXPORT_TABLES, tablesRequest).get(10, TimeUnit.SECONDS)) {
                logId = r.segment().get(PsDescriptor.LONG, 0);
                tick = r.segment().get(PsDescriptor.LONG, 8);
                assertEquals(1, r.segment().get(PsDescriptor.INT, 16), "one table");
            }
            assertEquals(p.export().log().id(), logId);
            e = refused(c, ExportDescriptor.EXPORT_ROWS, new byte[40]);
            assertEquals(PsException.Code.LENGTH_MISMATCH, e.code());
            assertTrue(e.getMessage().contains("at least"), e.getMessage());
            e = refused(c, ExportDescriptor.EXPORT_ROWS, rowsRequest(logId, 5, 4, 10, "t"));
            assertTrue(e.getMessage().contains("not a range"), e.getMessage());
            e = refused(c, ExportDescriptor.EXPORT_ROWS, rowsRequest(logId, 0, tick, 0, "t"));
            assertTrue(e.getMessage().contains("rows a page"), e.getMessage());
            e = refused(c, ExportDescriptor.EXPORT_ROWS, rowsRequest(logId, 0, tick, 10, "nope"));
            assertEquals(PsException.Code.UNKNOWN_TABLE, e.code());
            byte[] trailing = Arrays.copyOf(rowsRequest(logId, 0, tick, 10, "t"),
                    ExportDescriptor.rowsRequestBytes(1) + 8);
            e = refused(c, ExportDescriptor.EXPORT_ROWS, trailing);
            assertEquals(PsException.Code.LENGTH_MISMATCH, e.code());
            // Return codes, not errors: another log (a restarted server), a tick not sealed yet.
            assertEquals(ExportDescriptor.LOG_CHANGED, status(c, rowsRequest(logId + 1, 0, tick, 10, "t")));
            assertEquals(ExportDescriptor.NOT_SEALED, status(c, rowsRequest(logId, 0, tick + 1, 10, "t")));
            assertEquals(ExportDescriptor.OK, status(c, rowsRequest(logId, 0, tick, 10, "t")));
            assertEquals(5, p.export().refused(), "the malformed requests counted (not the unknown table)");
        }
    }

    private static byte[] rowsRequest(long logId, long since, long upTo, int max, String table) {
        byte[] name = PsDescriptor.nameBytes(table);
        byte[] body = new byte[ExportDescriptor.rowsRequestBytes(name.length)];
        long[] all = new long[ExportDescriptor.SLOT_BITMAP / 8];
        Arrays.fill(all, -1L);
        ExportDescriptor.writeRowsRequest(MemorySegment.ofArray(body), logId, since, upTo, 0, true, max, all, name);
        return body;
    }

    private static int status(RpcChannel c, byte[] body) throws Exception {
        try (RpcResponse r = c.call(ExportDescriptor.EXPORT_ROWS, body).get(10, TimeUnit.SECONDS)) {
            return r.segment().get(PsDescriptor.INT, 0);
        }
    }

    private static PsException refused(RpcChannel c, RpcMethod method, byte[] body) throws Exception {
        try {
            c.call(method, body).get(10, TimeUnit.SECONDS).release();
        } catch (ExecutionException e) {
            return refusal(e, c.address());
        }
        throw new AssertionError("accepted");
    }

    @Test
    void malformedPagesAreRefusedByTheFollowerBeforeAnyRowIsApplied() {
        long rowBytes = 32; // id, steps, 4 weights (SGD: no state)
        long[] all = new long[ExportDescriptor.SLOT_BITMAP / 8];
        Arrays.fill(all, -1L);
        long[] ids = {3, 9, 12};
        MemorySegment good = page(ids, rowBytes, ExportDescriptor.OK, 0, 1);
        assertEquals(3 * rowBytes, DeltaFollower.checkPage(good, rowBytes, true, 0, all).byteSize());

        assertRefused("status is 1", page(ids, rowBytes, ExportDescriptor.LOG_CHANGED, 0, 1), rowBytes, all);
        assertRefused("another table layout", good, 48, all);
        assertRefused("has 120 bytes", good.asSlice(0, good.byteSize() - 8), rowBytes, all);
        assertRefused("shorter than its header", good.asSlice(0, 16), rowBytes, all);
        assertRefused("ascending by id", page(new long[] {3, 12, 9}, rowBytes, ExportDescriptor.OK, 0, 1), rowBytes,
                all);
        assertRefused("negative step count", page(ids, rowBytes, ExportDescriptor.OK, -1, 1), rowBytes, all);
        assertRefused("more flag", page(ids, rowBytes, ExportDescriptor.OK, 0, 7), rowBytes, all);
        long[] notSlotOf9 = all.clone();
        int slot = Slots.slotOf(9);
        notSlotOf9[slot >>> 6] &= ~(1L << (slot & 63));
        assertRefused("which this server does not hold", good, rowBytes, notSlotOf9);
        // A later page must continue after the last id of the one before.
        PsException e = org.junit.jupiter.api.Assertions.assertThrows(PsException.class,
                () -> DeltaFollower.checkPage(good, rowBytes, false, 5, all));
        assertTrue(e.getMessage().contains("does not follow id 5"), e.getMessage());
    }

    private static void assertRefused(String reason, MemorySegment page, long rowBytes, long[] slots) {
        PsException e = org.junit.jupiter.api.Assertions.assertThrows(PsException.class,
                () -> DeltaFollower.checkPage(page, rowBytes, true, 0, slots));
        assertTrue(e.getMessage().contains(reason), () -> "'" + e.getMessage() + "' should say " + reason);
    }

    private static MemorySegment page(long[] ids, long rowBytes, int status, long steps, int more) {
        MemorySegment s = MemorySegment.ofArray(new byte[(int) (ExportDescriptor.PAGE_HEADER + ids.length * rowBytes)]);
        s.set(PsDescriptor.INT, 0, status);
        s.set(PsDescriptor.INT, 4, ids.length);
        s.set(PsDescriptor.LONG, 8, rowBytes);
        s.set(PsDescriptor.LONG, 16, ids[ids.length - 1]);
        s.set(PsDescriptor.INT, 24, more);
        for (int i = 0; i < ids.length; i++) {
            s.set(PsDescriptor.LONG, ExportDescriptor.PAGE_HEADER + i * rowBytes, ids[i]);
            s.set(PsDescriptor.LONG, ExportDescriptor.PAGE_HEADER + i * rowBytes + 8, steps);
        }
        return s;
    }
}
