package dev.ferry.bench.ps;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;

import dev.ferry.metrics.FerryMetrics;
import dev.ferry.metrics.MetricsServer;

/**
 * Metrics of the benchmark's processes ({@code --metrics-port}): each child serves its meters,
 * and the driver scrapes them all every second, as a Prometheus would, so that a run measures
 * what metrics cost.
 */
final class BenchMetrics {

    private BenchMetrics() {
    }

    /** A served endpoint, or nothing. */
    interface Endpoint {
        void close();
    }

    /** Serves the meters {@code bind} binds on 127.0.0.1:{@code port}; nothing when {@code port} is 0. */
    static Endpoint serve(int port, Consumer<FerryMetrics> bind) {
        if (port == 0) {
            return () -> { };
        }
        FerryMetrics metrics = FerryMetrics.prometheus();
        bind.accept(metrics);
        return MetricsServer.start(metrics, "127.0.0.1", port, () -> true)::close;
    }

    /** Scrapes every port once a second on a daemon thread until closed; counts failures. */
    static final class Scraper implements AutoCloseable {
        private final Thread thread;
        private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        private volatile boolean stop;
        private volatile long scrapes;
        private volatile long failures;
        private volatile long bytes;

        Scraper(List<Integer> ports) {
            thread = Thread.ofPlatform().daemon().name("ferry-bench-scraper").start(() -> {
                while (!stop) {
                    long next = System.nanoTime() + 1_000_000_000L;
                    for (int port : ports) {
                        try {
                            HttpResponse<String> r = http.send(HttpRequest.newBuilder(
                                    URI.create("http://127.0.0.1:" + port + "/metrics")).timeout(Duration.ofSeconds(2))
                                    .GET().build(), HttpResponse.BodyHandlers.ofString());
                            if (r.statusCode() == 200) {
                                scrapes++;
                                bytes += r.body().length();
                            } else {
                                failures++;
                            }
                        } catch (IOException e) {
                            failures++;
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                    long left = next - System.nanoTime();
                    if (left > 0) {
                        try {
                            Thread.sleep(Duration.ofNanos(left));
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            });
        }

        long scrapes() {
            return scrapes;
        }

        long failures() {
            return failures;
        }

        long bytes() {
            return bytes;
        }

        @Override
        public void close() {
            stop = true;
            thread.interrupt();
            try {
                thread.join(5_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            http.close();
        }
    }
}
