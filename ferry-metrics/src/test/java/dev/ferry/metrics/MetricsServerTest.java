package dev.ferry.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;

/** The endpoint's answers: metrics, readiness before and after, unknown paths, a taken port. */
class MetricsServerTest {

    @Test
    void servesMetricsAndReadiness() throws Exception {
        FerryMetrics metrics = FerryMetrics.prometheus();
        metrics.registry().counter("ferry.test.things").increment(3);
        AtomicBoolean ready = new AtomicBoolean();
        try (MetricsServer server = MetricsServer.start(metrics, "127.0.0.1", 0, ready::get);
                HttpClient http = HttpClient.newHttpClient()) {
            String base = "http://" + server.address();
            HttpResponse<String> health = get(http, base + "/healthz");
            assertEquals(503, health.statusCode());
            assertEquals("starting\n", health.body());
            ready.set(true);
            health = get(http, base + "/healthz");
            assertEquals(200, health.statusCode());
            assertEquals("ready\n", health.body());
            HttpResponse<String> m = get(http, base + "/metrics");
            assertEquals(200, m.statusCode());
            assertEquals(MetricsServer.CONTENT_TYPE, m.headers().firstValue("Content-Type").orElse(""));
            assertTrue(m.body().contains("# TYPE ferry_test_things_total counter"), m.body());
            assertTrue(m.body().contains("ferry_test_things_total 3.0"), m.body());
            assertEquals(404, get(http, base + "/nothing").statusCode());
            HttpResponse<String> post = http.send(HttpRequest.newBuilder(URI.create(base + "/metrics"))
                    .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(405, post.statusCode());

            UncheckedIOException taken = assertThrows(UncheckedIOException.class,
                    () -> MetricsServer.start(metrics, "127.0.0.1", server.port(), ready::get));
            assertTrue(taken.getMessage().contains("127.0.0.1:" + server.port()), taken.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> MetricsServer.start(metrics, "127.0.0.1", 70_000, () -> true));
    }

    private static HttpResponse<String> get(HttpClient http, String url) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(url)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }
}
