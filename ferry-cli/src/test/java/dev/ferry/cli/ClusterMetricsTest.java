package dev.ferry.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import dev.ferry.cluster.ClusterServerMain;
import dev.ferry.cluster.EmbeddedZooKeeper;
import dev.ferry.ps.net.ChildJvm;

/**
 * {@code ferry server --cluster ... --metrics-port}: a cluster member serves its meters and
 * readiness like a standalone server, ready once it has joined the cluster.
 */
@Timeout(120)
class ClusterMetricsTest {

    @Test
    void aClusterMemberServesMetricsAndHealth(@TempDir Path dir) throws Exception {
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        int metricsPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            metricsPort = socket.getLocalPort();
        }
        try (EmbeddedZooKeeper zk = EmbeddedZooKeeper.start(dir.resolve("zk"), 0, 500);
                ChildJvm server = ChildJvm.start(ChildJvm.javaCommand(List.of("-Xmx256m", "-XX:+UseSerialGC"),
                        FerryCommand.class.getName(), List.of("server", "--cluster", "zk://" + zk.connectString() + "/m",
                                "--id", "s0", "--transport", "tcp", "--no-auth", "--metrics-port",
                                Integer.toString(metricsPort), "--exit-on-stdin-eof")), "s0")) {
            server.expect(ClusterServerMain.JOINED, 60_000);
            String base = "http://127.0.0.1:" + metricsPort;
            HttpResponse<String> health = http.send(HttpRequest.newBuilder(URI.create(base + "/healthz")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode(), health.body());
            String metrics = http.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            for (String series : List.of("ferry_rpc_server_requests_total", "ferry_transport_links_open{",
                    "ferry_memory_registered_bytes")) {
                assertTrue(metrics.contains(series), series + " missing from /metrics");
            }
        }
    }
}
