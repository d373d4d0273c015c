package dev.ferry.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsDescriptor;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What a scrape of a bound server and client shows, exactly, and what recording costs. */
class FerryMetricsTest {

    private static final Pattern NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    static TransportConfig transport(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 32L << 20)
                .withConnectTimeoutMillis(5_000);
    }

    @Test
    void evictionCountersAreExported() {
        FerryMetrics metrics = FerryMetrics.prometheus();
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            metrics.bind(ps);
            dev.ferry.ps.SparseTable t = ps.createTable(TableConfig.of("ev", 2, Optimizer.sgd(0.1))
                    .capacity(1_000, dev.ferry.ps.EvictionPolicy.LEAST_RECENTLY_UPDATED, 0.5));
            long[] ids = java.util.stream.LongStream.range(0, 1_500).toArray();
            t.gather(ids, 0, ids.length, java.lang.foreign.MemorySegment.ofArray(new float[2 * ids.length]));
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (t.rows() > 750 && System.nanoTime() < deadline) {
                Thread.onSpinWait(); // the server's evictor thread trims to 500 rows when over 750
            }
            dev.ferry.ps.TableStats stats = t.stats();
            for (dev.ferry.ps.TableStats before = null; !stats.equals(before); stats = t.stats()) {
                before = stats; // until the evictor's pass has ended
                java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L);
            }
            String table = "table=\"ev\"";
            Map<String, Double> s;
            do {
                // The table's meters appear, and its snapshot is renewed, at a refresh after the
                // cached one (100 ms) has aged: until then the sample may be missing or old.
                java.util.concurrent.locks.LockSupport.parkNanos(20_000_000L);
                metrics.refresh();
                s = Exposition.parse(metrics.scrape());
            } while (!hasValue(s, "ferry_ps_table_evicted_total", stats.evictedCapacity(), table, "reason=\"capacity\"")
                    && System.nanoTime() < deadline);
            assertTrue(stats.evictedCapacity() > 0 && stats.rows() <= 750, stats.toString());
            assertEquals(stats.admitted() - stats.evictedCapacity(), stats.rows());
            assertEquals(1_500, stats.admitted() + stats.rejected());
            assertEquals(stats.evictedCapacity(),
                    Exposition.value(s, "ferry_ps_table_evicted_total", table, "reason=\"capacity\""));
            assertEquals(0, Exposition.value(s, "ferry_ps_table_evicted_total", table, "reason=\"ttl\""));
            assertEquals(stats.refusedFull(), Exposition.value(s, "ferry_ps_table_refused_full_total", table));
            assertEquals(stats.admitted(), Exposition.value(s, "ferry_ps_table_admitted_total", table));
            assertEquals(stats.rejected(), Exposition.value(s, "ferry_ps_table_rejected_total", table));
        }
    }

    /** Whether {@code samples} hold {@code name} with these labels at {@code expected}; false if it is not there yet. */
    private static boolean hasValue(Map<String, Double> samples, String name, double expected, String... labels) {
        try {
            return Exposition.value(samples, name, labels) == expected;
        } catch (AssertionError missing) {
            return false;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"shm", "netty"})
    void scrapeShowsEveryLayerWithExactCounts(String provider) throws Exception {
        FerryMetrics serverMetrics = FerryMetrics.prometheus();
        FerryMetrics clientMetrics = FerryMetrics.prometheus();
        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withHandlerThreads(2);
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults());
                PsServer server = PsServer.open(ps, 0, 1, null, rpc)) {
            serverMetrics.bind(server);
            String address = server.listen(transport(provider));
            try (PsClient client = PsClient.connect(rpc, transport(provider), List.of(address))) {
                clientMetrics.bind(client.rpcClient());
                client.createTable(TableConfig.of("emb", 8, Optimizer.sgd(0.1)).withMaxRows(1 << 16));
                int pulls = 40;
                int pushes = 15;
                for (int i = 0; i < pulls; i++) {
                    client.pull("emb", new long[] {i, i + 1000});
                }
                for (int i = 0; i < pushes; i++) {
                    client.push("emb", new long[] {i}, new float[8]);
                }
                Map<String, Double> s = Exposition.parse(serverMetrics.scrape());
                Map<String, Double> c = Exposition.parse(clientMetrics.scrape());

                assertEquals(pulls, Exposition.value(c, "ferry_rpc_client_call_seconds_count", "method=\"pull\"",
                        "outcome=\"ok\""));
                assertEquals(0, Exposition.value(c, "ferry_rpc_client_call_seconds_count", "method=\"pull\"",
                        "outcome=\"error\""));
                assertEquals(pushes, Exposition.value(c, "ferry_rpc_client_call_seconds_count", "method=\"push\"",
                        "outcome=\"ok\""));
                assertEquals(pulls, Exposition.value(s, "ferry_rpc_server_handler_seconds_count", "method=\"pull\"",
                        "outcome=\"ok\""));
                assertEquals(pushes, Exposition.value(s, "ferry_rpc_server_handler_seconds_count",
                        "method=\"push\"", "outcome=\"ok\""));
                // the histogram's last bucket holds every call
                assertEquals(pulls, Exposition.value(c, "ferry_rpc_client_call_seconds_bucket", "method=\"pull\"",
                        "outcome=\"ok\"", "le=\"+Inf\""));
                assertTrue(Exposition.value(c, "ferry_rpc_client_call_seconds_sum", "method=\"pull\"",
                        "outcome=\"ok\"") > 0);
                assertEquals(2.0 * pulls, Exposition.value(s, "ferry_ps_table_rows", "table=\"emb\""));
                assertEquals(1, Exposition.value(s, "ferry_ps_tables"));
                assertEquals(0, Exposition.value(s, "ferry_ps_read_only"));
                assertTrue(Exposition.value(s, "ferry_ps_table_memory_bytes", "table=\"emb\"") > 0);
                assertEquals(2.0 * pulls, Exposition.value(s, "ferry_ps_table_admitted_total", "table=\"emb\""));
                assertEquals(0, Exposition.value(s, "ferry_ps_table_rejected_total", "table=\"emb\""));
                assertEquals(0, Exposition.value(s, "ferry_ps_table_admission_filter_bytes", "table=\"emb\""));

                double calls = Exposition.value(c, "ferry_rpc_client_calls_total");
                assertEquals(calls, Exposition.value(c, "ferry_rpc_client_succeeded_total"));
                assertTrue(calls >= pulls + pushes + 1, "calls " + calls);
                assertEquals(1, Exposition.value(c, "ferry_rpc_client_servers"));
                assertEquals(0, Exposition.value(c, "ferry_rpc_client_servers_on_fallback"));
                assertTrue(Exposition.value(s, "ferry_rpc_server_executions_total") >= pulls + pushes);

                String serverSide = "role=\"server\"";
                String tag = "provider=\"" + provider + "\"";
                assertTrue(Exposition.value(s, "ferry_transport_messages_received_total", tag, serverSide)
                        >= pulls + pushes);
                assertTrue(Exposition.value(s, "ferry_transport_received_bytes_total", tag, serverSide) > 0);
                assertTrue(Exposition.value(c, "ferry_transport_links_open", tag, "role=\"client\"") >= 1);
                assertEquals(0, Exposition.value(s, "ferry_transport_link_failures_total", tag, serverSide));
                Exposition.value(s, "ferry_transport_credit_stalls_total", tag, serverSide);
                Exposition.value(s, "ferry_transport_in_flight_bytes", tag, serverSide);
                Exposition.value(s, "ferry_transport_credit_frames_sent_total", tag, serverSide);
                if (!provider.equals("netty")) {
                    assertTrue(Exposition.value(s, "ferry_memory_registered_bytes", tag, serverSide) > 0);
                    assertTrue(Exposition.value(s, "ferry_memory_pool_quota_bytes", tag, serverSide,
                            "pool=\"receive\"") > 0);
                }
                for (Map<String, Double> samples : List.of(s, c)) {
                    for (String key : samples.keySet()) {
                        String name = key.contains("{") ? key.substring(0, key.indexOf('{')) : key;
                        assertTrue(NAME.matcher(name).matches(), name);
                        assertFalse(key.contains("peer="), "no label per peer: " + key);
                    }
                }
            }
        }
    }

    @Test
    void unnamedMethodsShareOneSeries() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        MethodTimers timers = new MethodTimers(registry, "t", "test", MethodNames.parameterServer(), true);
        timers.record(PsDescriptor.PULL.id(), 1_000, true);
        for (int id = 1; id <= 500; id++) {
            timers.record(id, 1_000, id % 2 == 0);
        }
        assertEquals(1, registry.get("t").tags("method", "pull", "outcome", "ok").timer().count());
        assertEquals(250, registry.get("t").tags("method", "other", "outcome", "ok").timer().count());
        assertEquals(250, registry.get("t").tags("method", "other", "outcome", "error").timer().count());
        assertEquals(2 * (MethodNames.parameterServer().names().size() + 1), registry.find("t").timers().size());
    }

    @Test
    void badNamesAreRefused() {
        var e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> MethodNames.none().with(7, "Bad-Name"));
        assertTrue(e.getMessage().contains("Bad-Name"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> MethodNames.none().with(7, MethodNames.OTHER));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> FerryMetrics.prometheus().bind((dev.ferry.transport.Transport) null, "Bad Role"));
    }

    @Test
    void recordingAllocatesNothing() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        MethodTimers timers = new MethodTimers(registry, "ferry.rpc.client.call", "test",
                MethodNames.parameterServer(), true);
        int[] methods = {PsDescriptor.PULL.id(), PsDescriptor.PUSH.id(), 12345};
        for (int i = 0; i < 200_000; i++) {
            timers.record(methods[i % 3], 1_000L + i % 1_000_000, i % 7 != 0);
        }
        registry.scrape();
        long thread = Thread.currentThread().threadId();
        int records = 500_000;
        long before = THREADS.getThreadAllocatedBytes(thread);
        for (int i = 0; i < records; i++) {
            timers.record(methods[i % 3], 1_000L + (i * 7919L) % 2_000_000_000L, i % 7 != 0);
        }
        long allocated = THREADS.getThreadAllocatedBytes(thread) - before;
        // The counter itself may show a few hundred bytes of noise; one object per record would be > 8 MB.
        assertTrue(allocated < 4096, allocated + " bytes allocated for " + records + " records");
    }

    @Test
    void transportsOfOneKindAreSummedIntoOneSeries() throws Exception {
        FerryMetrics metrics = FerryMetrics.prometheus();
        List<dev.ferry.transport.Transport> opened = new ArrayList<>();
        try {
            for (int i = 0; i < 3; i++) {
                dev.ferry.transport.Transport t = dev.ferry.transport.Transports.open(transport("netty"),
                        (from, m) -> m.release());
                opened.add(t);
                metrics.bind(t, "client");
                metrics.bind(t, "client");
            }
            Map<String, Double> s = Exposition.parse(metrics.scrape());
            assertEquals(3, Exposition.value(s, "ferry_transport_instances", "provider=\"netty\"", "role=\"client\""));
        } finally {
            opened.forEach(dev.ferry.transport.Transport::close);
        }
    }
}
