package dev.ferry.metrics.stat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

/** Parsing, rates and quantiles of {@code ferry stat}, on hand-written scrapes. */
class ServerStatTest {

    private static String scrape(long pulls, long fast, long stalls, long rows) {
        return """
                # HELP ferry_rpc_server_handler_seconds Time a handler ran
                # TYPE ferry_rpc_server_handler_seconds histogram
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="ok",le="1.0E-4"} %d
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="ok",le="0.001"} %d
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="ok",le="+Inf"} %d
                ferry_rpc_server_handler_seconds_count{method="pull",outcome="ok"} %d
                ferry_rpc_server_handler_seconds_sum{method="pull",outcome="ok"} 0.5
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="error",le="1.0E-4"} 0
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="error",le="0.001"} 0
                ferry_rpc_server_handler_seconds_bucket{method="pull",outcome="error",le="+Inf"} 0
                ferry_rpc_server_handler_seconds_count{method="pull",outcome="error"} 0
                ferry_rpc_server_handler_seconds_count{method="push",outcome="ok"} 0
                ferry_transport_credit_stalls_total{provider="shm",role="server"} %d.0
                ferry_transport_credit_stalls_total{provider="netty",role="server"} 1.0
                ferry_transport_links_open{provider="shm",role="server"} 4.0
                ferry_transport_messages_received_total{provider="shm",role="server"} %d.0
                ferry_ps_table_rows{table="emb"} %d.0
                ferry_ps_table_memory_bytes{table="emb"} 1048576.0
                ferry_memory_registered_bytes{provider="shm",role="server"} NaN
                """.formatted(fast, pulls, pulls, pulls, stalls, pulls, rows);
    }

    @Test
    void ratesAndQuantilesCoverTheInterval() {
        Samples before = Samples.parse(scrape(1000, 1000, 2, 500));
        // in the interval: 1000 pulls, 900 under 100 us, 100 between 100 us and 1 ms
        Samples after = Samples.parse(scrape(2000, 1900, 5, 800));
        ServerStat s = ServerStat.of("h:1", true, before, after, 2.0);
        assertEquals("ready", s.state());
        assertEquals(1, s.methods().size(), "a method never called has no line");
        ServerStat.MethodStat pull = s.methods().getFirst();
        assertEquals("server", pull.side());
        assertEquals(500.0, pull.opsPerSecond());
        assertEquals(0.0, pull.errorsPerSecond());
        assertEquals(2000.0, pull.calls());
        // p50: rank 500 of 1000, in the first bucket [0, 100 us] of 900
        assertEquals(1e-4 * 500 / 900, pull.p50(), 1e-12);
        // p99: rank 990, 90 into the second bucket's 100
        assertEquals(1e-4 + (1e-3 - 1e-4) * 90 / 100, pull.p99(), 1e-12);
        assertEquals(6.0, s.creditStalls().total());
        assertEquals(1.5, s.creditStalls().perSecond());
        assertEquals(4.0, s.links());
        assertEquals(0.0, s.registeredBytes(), "NaN samples are left out of sums");
        assertEquals(List.of(new ServerStat.TableStat("emb", 800, 1048576)), s.tables());
        assertEquals(500.0, s.traffic().getFirst().messagesPerSecond());
        assertTrue(Double.isNaN(s.serversOnFallback()), "not a client");
    }

    @Test
    void oneScrapeGivesTotalsAndNoRates() {
        ServerStat s = ServerStat.of("h:1", false, null, Samples.parse(scrape(10, 10, 0, 1)), 0);
        assertEquals("starting", s.state());
        assertTrue(Double.isNaN(s.methods().getFirst().opsPerSecond()));
        assertTrue(Double.isNaN(s.creditStalls().perSecond()));
        String json = StatView.json(List.of(s, ServerStat.down("h:2", "Connection refused")), "10:00:00");
        assertTrue(json.startsWith("{\"time\":\"10:00:00\",\"processes\":[{\"target\":\"h:1\",\"state\":\"starting\""),
                json);
        assertTrue(json.contains("\"opsPerSecond\":null"), json);
        assertTrue(json.contains("{\"target\":\"h:2\",\"state\":\"down\",\"error\":\"Connection refused\""), json);
        String text = StatView.text(List.of(s), "10:00:00", 1);
        assertTrue(text.contains("table emb"), text);
        assertTrue(text.contains("STARTING"), text);
    }

    @Test
    void quantileEdges() {
        Map<Double, Double> empty = new TreeMap<>(Map.of(1.0, 0.0, Double.POSITIVE_INFINITY, 0.0));
        assertTrue(Double.isNaN(ServerStat.quantile(empty, 0.5)));
        Map<Double, Double> overflow = new TreeMap<>(Map.of(1.0, 1.0, 10.0, 1.0, Double.POSITIVE_INFINITY, 100.0));
        assertEquals(10.0, ServerStat.quantile(overflow, 0.99), "past the last bound: the last bound");
    }

    @Test
    void labelsWithEscapesAndTimestampsParse() {
        Samples s = Samples.parse("""
                m{a="x\\"y",b="c,d"} 3 1700000000000
                m{a="z"} +Inf
                garbage line
                n 4.5e1
                """);
        assertEquals("x\"y", s.all("m").getFirst().label("a"));
        assertEquals("c,d", s.all("m").getFirst().label("b"));
        assertEquals(3.0, s.all("m").getFirst().value());
        assertEquals(Double.POSITIVE_INFINITY, s.all("m").get(1).value());
        assertEquals(45.0, s.sum("n"));
        assertEquals(3.0, s.sum("m", "a", "x\"y"));
    }
}
