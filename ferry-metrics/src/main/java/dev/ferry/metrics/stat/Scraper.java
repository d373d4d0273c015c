package dev.ferry.metrics.stat;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/** Fetches {@code /metrics} and {@code /healthz} of one process. */
public final class Scraper implements AutoCloseable {

    /** One answer: the samples and whether the process said it is ready. */
    public record Scrape(Samples samples, boolean ready, long nanos) {
    }

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    /**
     * Scrapes {@code target} ({@code host:port}).
     *
     * @throws IOException naming the target and what failed
     */
    public Scrape scrape(String target) throws IOException {
        if (!target.matches("[^/:\\s]+:\\d{1,5}") && !target.matches("\\[[0-9a-fA-F:]+\\]:\\d{1,5}")) {
            throw new IllegalArgumentException("a target is HOST:PORT (the metrics port): " + target);
        }
        try {
            HttpResponse<String> metrics = http.send(request(target, "/metrics"), HttpResponse.BodyHandlers.ofString());
            long at = System.nanoTime();
            if (metrics.statusCode() != 200) {
                throw new IOException("/metrics answered HTTP " + metrics.statusCode());
            }
            HttpResponse<String> health = http.send(request(target, "/healthz"), HttpResponse.BodyHandlers.ofString());
            return new Scrape(Samples.parse(metrics.body()), health.statusCode() == 200, at);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        } catch (java.net.ConnectException e) {
            throw new IOException("connection refused (not started, or not serving metrics there)", e);
        } catch (java.net.http.HttpTimeoutException e) {
            throw new IOException("no answer within 2 s", e);
        } catch (IOException e) {
            String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            throw new IOException(why, e);
        }
    }

    private static HttpRequest request(String target, String path) {
        return HttpRequest.newBuilder(URI.create("http://" + target + path)).timeout(Duration.ofSeconds(2)).GET()
                .build();
    }

    @Override
    public void close() {
        http.close();
    }
}
