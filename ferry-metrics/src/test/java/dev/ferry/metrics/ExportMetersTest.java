package dev.ferry.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.DeltaFollower;
import dev.ferry.ps.net.ExportService;
import dev.ferry.ps.net.PsServer;
import dev.ferry.ps.net.RoutingTable;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

/** The live export's meters read the export's and the follower's counters (in-JVM transport). */
class ExportMetersTest {

    @org.junit.jupiter.api.io.TempDir
    java.nio.file.Path dir;

    @Test
    void theExportAndTheFollowerHaveTheirMeters() throws Exception {
        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(2);
        TransportConfig transport = TransportConfig.defaults("local");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (ParameterServer training = ParameterServer.create(PsConfig.defaults());
                ParameterServer serving = ParameterServer.follower(PsConfig.defaults())) {
            training.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
            training.push("t", 2, new long[] {1, 2, 3}, 0, 3, java.lang.foreign.MemorySegment.ofArray(new float[6]));
            training.createDense(new dev.ferry.ps.DenseConfig("w", 4, Optimizer.sgd(1), dev.ferry.ps.Initializer.zeros()));
            try (PsServer ts = PsServer.open(training, 0, 1, dir, rpc);
                    PsServer ss = PsServer.openMember(serving, "s", null, rpc, false)) {
                ExportService export = ExportService.attach(ts);
                String address = ts.listen(transport);
                String servingAddress = ss.listen(transport);
                ss.install(RoutingTable.of(1, List.of("s"), List.of(servingAddress), new int[RoutingTable.GROUPS]));
                ExportMeters.bind(registry, export);
                training.checkpoint(dir);
                try (DeltaFollower follower = DeltaFollower.start(ss, () -> List.of(address), rpc, transport, 20)) {
                    ExportMeters.bind(registry, follower);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (follower.checkpointRows() < 3) {
                        assertTrue(System.nanoTime() < deadline, "the follower loaded the checkpoint: "
                                + follower.lastFallback() + "; " + follower.lastError());
                        Thread.sleep(10);
                    }
                    // The dense tensor came with the checkpoint; a step after it travels as a delta.
                    training.dense("w").apply(java.lang.foreign.MemorySegment.ofArray(new float[4]));
                    while (follower.denseApplied() < 1) {
                        assertTrue(System.nanoTime() < deadline, "the follower merged the tensor: " + follower.lastError());
                        Thread.sleep(10);
                    }
                    assertEquals(0.0, registry.get("ferry.export.rows.applied").functionCounter().count(),
                            "nothing changed after the checkpoint");
                    assertEquals(1.0, registry.get("ferry.export.checkpoint.loads").functionCounter().count());
                    assertEquals(3.0, registry.get("ferry.export.checkpoint.rows").functionCounter().count());
                    assertEquals(0.0, registry.get("ferry.export.checkpoint.fallbacks").functionCounter().count());
                    assertEquals(0.0, registry.get("ferry.export.rows.deleted").functionCounter().count());
                    assertEquals(0.0, registry.get("ferry.export.tombstones.exported").functionCounter().count());
                    assertEquals(0.0, registry.get("ferry.export.log.tombstones").gauge().value());
                    // Once, or twice if a poll read the step's copy before its stamp was sealed.
                    double dense = registry.get("ferry.export.dense.applied").functionCounter().count();
                    assertTrue(dense >= 1 && dense <= 2, "dense merged " + dense);
                    assertTrue(registry.get("ferry.export.dense.exported").functionCounter().count() >= dense);
                    assertEquals(3.0, registry.get("ferry.export.log.entries").gauge().value());
                    assertTrue(registry.get("ferry.export.lag").gauge().value() >= 0);
                    assertEquals(0.0, registry.get("ferry.export.poll.failures").functionCounter().count());
                    assertEquals(0.0, registry.get("ferry.export.resyncs").functionCounter().count());
                    assertTrue(registry.get("ferry.export.polls").functionCounter().count() >= 1);
                }
            }
        }
    }
}
