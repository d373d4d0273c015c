package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import dev.ferry.ps.ExportLog;
import dev.ferry.ps.ExportRows;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcResponse;

/**
 * A serving server catching up from a training server's latest checkpoint plus the later
 * deltas, and the fallbacks to a full resync (no checkpoint, a restarted training server, a
 * checkpoint lacking a slot, an unreadable one); tcp, in one process.
 */
class ExportCatchUpTest extends ExportTestBase {

    @Test
    void aFollowerLoadsTheLatestCheckpointAndPullsOnlyTheLaterDeltas() throws Exception {
        Training t = training(dir);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.adagrad(0.1)));
        long[] stored = ids(5_000, 7919);
        push(t.ps(), stored, 1f);
        t.ps().checkpoint(dir);
        t.ps().checkpoint(dir); // the newest one is used
        long[] changed = Arrays.copyOf(stored, 200);
        push(t.ps(), changed, 2f);
        long[] added = ids(100, 13);
        for (int i = 0; i < added.length; i++) {
            added[i] += 1_000_000_000L; // new ids
        }
        push(t.ps(), added, 3f);
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(t.ps(), s.ps()), "serving equal to training");
            await(() -> f.rounds() >= 3, "two more polls");
            assertEquals(0, f.resyncs(), () -> "resynced: " + f.lastFallback());
            assertEquals(0, f.checkpointFallbacks());
            // A poll that failed (a connection slower than the deadline on a loaded machine) loads again.
            long loads = f.checkpointLoads();
            assertTrue(loads >= 1 && loads <= 1 + f.failures(), "loads " + loads + ", " + f.lastError());
            assertEquals(loads * stored.length, f.checkpointRows());
            if (f.failures() == 0) {
                // Only the rows changed after the checkpoint's tick travel as deltas, each once.
                assertEquals(changed.length + added.length, f.rowsApplied() + f.rowsOlder());
                assertEquals(changed.length + added.length, f.rowsApplied());
            }
            // And it follows on from there.
            push(t.ps(), added, 4f);
            await(() -> equal(t.ps(), s.ps()), "serving equal after more pushes");
            assertEquals(0, f.resyncs());
        }
    }

    @Test
    void withoutACheckpointItResyncsEverything() throws Exception {
        Training t = training(null);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long[] stored = ids(1_000, 31);
        push(t.ps(), stored, 1f);
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(t.ps(), s.ps()), "serving equal to training");
            assertEquals(0, f.checkpointLoads());
            assertTrue(f.resyncs() >= 1);
            assertEquals(f.resyncs(), f.checkpointFallbacks());
            assertTrue(f.lastFallback().contains("no checkpoint stamped by its current export log"), f.lastFallback());
            if (f.failures() == 0) {
                assertEquals(stored.length, f.rowsApplied());
            }
        }
    }

    @Test
    void aRestartedTrainingServersOldCheckpointIsNotUsedItsNewOneIs() throws Exception {
        Training before = training(dir);
        before.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long[] stored = ids(1_000, 31);
        push(before.ps(), stored, 1f);
        before.ps().checkpoint(dir);
        before.server().close();
        before.ps().close();
        // Restarted from that checkpoint: another export log, whose ticks the old stamp does not name.
        Training after = training(ParameterServer.open(PsConfig.defaults(), dir), dir);
        push(after.ps(), Arrays.copyOf(stored, 10), 2f);
        Serving s = serving();
        try (DeltaFollower f = follow(s, after)) {
            await(() -> equal(after.ps(), s.ps()), "serving equal to training");
            assertEquals(0, f.checkpointLoads());
            assertTrue(f.resyncs() >= 1);
            assertTrue(f.lastFallback().contains("no checkpoint stamped"), f.lastFallback());
        }
        after.ps().checkpoint(dir);
        push(after.ps(), Arrays.copyOf(stored, 20), 3f);
        Serving again = serving();
        try (DeltaFollower f = follow(again, after)) {
            await(() -> equal(after.ps(), again.ps()), "the second serving server equal to training");
            assertTrue(f.checkpointLoads() >= 1);
            assertEquals(0, f.resyncs());
            if (f.failures() == 0) {
                assertEquals(1, f.checkpointLoads());
                assertEquals(20, f.rowsApplied() + f.rowsOlder());
            }
        }
    }

    @Test
    void aCheckpointLackingASlotTheTrainingServerHoldsNowIsNotUsed() throws Exception {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, "t", dir, rpc(), false);
        ExportService.attach(server);
        String address = server.listen(config("tcp"));
        track(ps, server);
        int[] half = new int[RoutingTable.GROUPS];
        for (int g = 0; g < half.length; g++) {
            half[g] = g % 2;
        }
        server.install(RoutingTable.of(1, List.of("t", "x"), List.of(address, "127.0.0.1:9"), half));
        ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long[] stored = ids(1_000, 31);
        push(ps, stored, 1f);
        ps.checkpoint(dir); // holds the even groups only
        server.install(RoutingTable.of(2, List.of("t", "x"), List.of(address, "127.0.0.1:9"),
                new int[RoutingTable.GROUPS]));
        Training t = new Training(ps, server, address, null);
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(ps, s.ps()), "serving equal to training");
            assertEquals(0, f.checkpointLoads());
            assertTrue(f.resyncs() >= 1);
            assertTrue(f.lastFallback().contains("lacks slot"), f.lastFallback());
        }
    }

    @Test
    void anUnreadableCheckpointFallsBackToAFullResync() throws Exception {
        Training t = training(dir);
        t.ps().createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)).withShards(1));
        push(t.ps(), ids(1_000, 31), 1f);
        Path checkpoint = t.ps().checkpoint(dir);
        Path rows;
        try (Stream<Path> files = Files.list(checkpoint)) {
            rows = files.filter(p -> p.getFileName().toString().endsWith(".rows")).findFirst().orElseThrow();
        }
        byte[] bytes = Files.readAllBytes(rows);
        bytes[bytes.length / 2] ^= 1;
        Files.write(rows, bytes);
        Serving s = serving();
        try (DeltaFollower f = follow(s, t)) {
            await(() -> equal(t.ps(), s.ps()), "serving equal to training");
            assertEquals(0, f.checkpointLoads());
            assertTrue(f.resyncs() >= 1);
            assertTrue(f.lastFallback().contains("cannot be loaded") && f.lastFallback().contains("CRC32C"),
                    f.lastFallback());
        }
    }

    @Test
    void aDeletionForgottenAfterTheRetentionMakesAnOlderCursorResync() throws Exception {
        AtomicLong clock = new AtomicLong();
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.open(ps, 0, 1, dir, rpc());
        ExportLog log = new ExportLog(ps, 1_000, clock::get);
        ExportService.attach(server, log);
        String address = server.listen(config("tcp"));
        track(ps, server);
        ps.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        push(ps, new long[] {1, 2, 3}, 1f);
        ps.checkpoint(dir); // before the deletion
        long beforeDeletion = log.sealed();
        assertTrue(ExportRows.evict(ps.table("t"), 2));
        clock.addAndGet(1_001);
        log.seal();
        assertTrue(log.forgottenUpTo() > beforeDeletion);
        try (RpcClient client = RpcClient.open(rpc(), config("tcp"))) {
            RpcChannel c = client.channel(address);
            byte[] name = PsDescriptor.nameBytes("t");
            long[] all = new long[ExportDescriptor.SLOT_BITMAP / 8];
            Arrays.fill(all, -1L);
            byte[] body = new byte[ExportDescriptor.rowsRequestBytes(name.length)];
            ExportDescriptor.writeRowsRequest(MemorySegment.ofArray(body), log.id(), beforeDeletion, log.sealed(), 0,
                    true, true, 100, all, name);
            try (RpcResponse r = c.call(ExportDescriptor.EXPORT_ROWS, body).get(10, TimeUnit.SECONDS)) {
                assertEquals(ExportDescriptor.FORGOTTEN, r.segment().get(PsDescriptor.INT, 0));
            }
            // From tick 0 nothing can be missed.
            ExportDescriptor.writeRowsRequest(MemorySegment.ofArray(body), log.id(), 0, log.sealed(), 0, true, true,
                    100, all, name);
            try (RpcResponse r = c.call(ExportDescriptor.EXPORT_ROWS, body).get(10, TimeUnit.SECONDS)) {
                assertEquals(ExportDescriptor.OK, r.segment().get(PsDescriptor.INT, 0));
                assertEquals(2, r.segment().get(PsDescriptor.INT, 4), "rows 1 and 3");
                assertEquals(0, r.segment().get(PsDescriptor.INT, 28), "no tombstone left");
            }
            // A checkpoint from before a forgotten deletion would bring the row back: not offered.
            byte[] ask = new byte[ExportDescriptor.CHECKPOINT_REQUEST];
            ask[0] = ExportDescriptor.VERSION;
            try (RpcResponse r = c.call(ExportDescriptor.EXPORT_CHECKPOINT, ask).get(10, TimeUnit.SECONDS)) {
                assertEquals(ExportDescriptor.NO_CHECKPOINT, r.segment().get(PsDescriptor.INT, 0));
            }
        }
        Serving s = serving();
        try (DeltaFollower f = follow(s, new Training(ps, server, address, null))) {
            await(() -> equal(ps, s.ps()), "serving equal to training");
            assertTrue(f.resyncs() >= 1);
            assertFalse(ExportRows.of(s.ps().table("t")).containsKey(2L));
        }
        SparseTable served = s.ps().table("t");
        assertEquals(2, served.rows());
        assertArrayEquals(new long[] {1, 3}, ExportRows.of(served).keySet().stream().mapToLong(Long::longValue).toArray());
    }
}
