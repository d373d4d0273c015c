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

    @Test
    void theExportAndTheFollowerHaveTheirMeters() throws Exception {
        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(2);
        TransportConfig transport = TransportConfig.defaults("local");
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (ParameterServer training = ParameterServer.create(PsConfig.defaults());
                ParameterServer serving = ParameterServer.follower(PsConfig.defaults())) {
            training.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
            training.push("t", 2, new long[] {1, 2, 3}, 0, 3, java.lang.foreign.MemorySegment.ofArray(new float[6]));
            try (PsServer ts = PsServer.open(training, 0, 1, null, rpc);
                    PsServer ss = PsServer.openMember(serving, "s", null, rpc, false)) {
                ExportService export = ExportService.attach(ts);
                String address = ts.listen(transport);
                String servingAddress = ss.listen(transport);
                ss.install(RoutingTable.of(1, List.of("s"), List.of(servingAddress), new int[RoutingTable.GROUPS]));
                ExportMeters.bind(registry, export);
                try (DeltaFollower follower = DeltaFollower.start(ss, () -> List.of(address), rpc, transport, 20)) {
                    ExportMeters.bind(registry, follower);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                    while (follower.rowsApplied() < 3) {
                        assertTrue(System.nanoTime() < deadline, "the follower applied the rows");
                        Thread.sleep(10);
                    }
                    assertEquals(3.0, registry.get("ferry.export.rows.applied").functionCounter().count());
                    assertTrue(registry.get("ferry.export.rows.exported").functionCounter().count() >= 3);
                    assertTrue(registry.get("ferry.export.bytes.exported").functionCounter().count() >= 3 * 24);
                    assertEquals(3.0, registry.get("ferry.export.log.entries").gauge().value());
                    assertTrue(registry.get("ferry.export.lag").gauge().value() >= 0);
                    assertEquals(0.0, registry.get("ferry.export.poll.failures").functionCounter().count());
                    assertEquals(1.0, registry.get("ferry.export.resyncs").functionCounter().count());
                    assertTrue(registry.get("ferry.export.polls").functionCounter().count() >= 1);
                }
            }
        }
    }
}
