package dev.ferry.cli;

import java.util.concurrent.atomic.AtomicBoolean;

import dev.ferry.metrics.FerryMetrics;
import dev.ferry.metrics.MetricsServer;
import dev.ferry.ps.net.PsServer;
import dev.ferry.ps.net.PsServerMain;

/**
 * The metrics endpoint of {@code ferry server --metrics-port}: it listens before the tables are
 * restored (so {@code /healthz} says 503 while they load), binds the server's meters once it is
 * made, and turns ready when the server listens.
 */
final class MetricsEndpoint implements PsServerMain.Listener, AutoCloseable {

    private final FerryMetrics metrics = FerryMetrics.prometheus();
    private final AtomicBoolean ready = new AtomicBoolean();
    private MetricsServer http;

    private MetricsEndpoint() {
    }

    static MetricsEndpoint start(String host, int port) {
        MetricsEndpoint endpoint = new MetricsEndpoint();
        endpoint.http = MetricsServer.start(endpoint.metrics, host, port, endpoint.ready::get);
        return endpoint;
    }

    String address() {
        return http.address();
    }

    @Override
    public void opened(PsServer server) {
        metrics.bind(server);
    }

    @Override
    public void exporting(dev.ferry.ps.net.ExportService service) {
        dev.ferry.metrics.ExportMeters.bind(metrics.registry(), service);
    }

    @Override
    public void following(dev.ferry.ps.net.DeltaFollower follower) {
        dev.ferry.metrics.ExportMeters.bind(metrics.registry(), follower);
    }

    @Override
    public void listening(PsServer server, String address) {
        ready.set(true);
    }

    @Override
    public void stopping() {
        ready.set(false);
    }

    @Override
    public void close() {
        http.close();
    }
}
