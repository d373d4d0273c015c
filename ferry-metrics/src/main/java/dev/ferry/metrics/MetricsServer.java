package dev.ferry.metrics;

import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * A small HTTP endpoint on one thread: {@code GET /metrics} answers the meters in Prometheus's
 * text format (version 0.0.4), {@code GET /healthz} answers 200 {@code ready} once the supplier
 * says so and 503 {@code starting} before. It listens on loopback unless told otherwise.
 */
public final class MetricsServer implements AutoCloseable {

    /** Content type of Prometheus's text exposition format. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private final HttpServer http;
    private final ExecutorService executor;

    private MetricsServer(HttpServer http, ExecutorService executor) {
        this.http = http;
        this.executor = executor;
    }

    /**
     * Starts serving {@code metrics} on {@code host:port} (port 0: a free one).
     *
     * @param ready true once the process serves (tables restored, listener up)
     * @throws UncheckedIOException if it cannot listen there, naming the address
     */
    public static MetricsServer start(FerryMetrics metrics, String host, int port, BooleanSupplier ready) {
        Objects.requireNonNull(metrics, "metrics");
        Objects.requireNonNull(ready, "ready");
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("metrics port must be in [0, 65535]: " + port);
        }
        HttpServer http;
        try {
            http = HttpServer.create(new InetSocketAddress(host, port), 16);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot serve metrics on " + host + ":" + port + ": " + e.getMessage(), e);
        }
        ExecutorService executor = Executors.newSingleThreadExecutor(
                r -> Thread.ofPlatform().daemon().name("ferry-metrics-http").unstarted(r));
        http.setExecutor(executor);
        http.createContext("/metrics", exchange -> {
            try (exchange) {
                if (!exchange.getRequestMethod().equals("GET") && !exchange.getRequestMethod().equals("HEAD")) {
                    answer(exchange, 405, "text/plain", "GET only\n");
                    return;
                }
                String body;
                try {
                    body = metrics.scrape();
                } catch (RuntimeException e) {
                    answer(exchange, 500, "text/plain", "scrape failed: " + e + "\n");
                    return;
                }
                answer(exchange, 200, CONTENT_TYPE, body);
            }
        });
        http.createContext("/healthz", exchange -> {
            try (exchange) {
                boolean up = ready.getAsBoolean();
                answer(exchange, up ? 200 : 503, "text/plain", up ? "ready\n" : "starting\n");
            }
        });
        http.createContext("/", exchange -> {
            try (exchange) {
                answer(exchange, 404, "text/plain", "try /metrics or /healthz\n");
            }
        });
        http.start();
        return new MetricsServer(http, executor);
    }

    /** The port it listens on. */
    public int port() {
        return http.getAddress().getPort();
    }

    /** {@code host:port} it listens on. */
    public String address() {
        return http.getAddress().getHostString() + ":" + port();
    }

    private static void answer(HttpExchange exchange, int status, String type, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", type);
        boolean head = exchange.getRequestMethod().equals("HEAD");
        exchange.sendResponseHeaders(status, head ? -1 : bytes.length);
        if (!head) {
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        }
    }

    /** Stops listening and ends its thread. */
    @Override
    public void close() {
        http.stop(0);
        executor.shutdownNow();
    }
}
