package dev.ferry.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.DoublePredicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.ChildJvm;
import dev.ferry.ps.net.PsClient;
import dev.ferry.ps.net.PsServerMain;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * A real Prometheus (Debian's {@code prometheus}, on loopback, by PID) scrapes two
 * {@code ferry server --metrics-port} processes every second during a pull/push workload; its
 * HTTP API then shows the series with the values the workload implies: both targets up, a pull
 * rate above zero on each server, the exact rows the pulls created, pushes counted exactly,
 * and credit stalls once the client holds its receive buffers. {@code ferry stat --once --json}
 * reads the same servers.
 */
class PrometheusScrapeTest {

    private static final String TABLE = "emb";
    private static final int DIMENSION = 8;
    private static final int IDS = 10_000;

    private final List<ChildJvm> servers = new ArrayList<>();
    private Process prometheus;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();

    @TempDir
    Path dir;

    @AfterEach
    void stop() throws InterruptedException {
        if (prometheus != null) {
            prometheus.destroy(); // SIGTERM to its PID
            if (!prometheus.waitFor(10, TimeUnit.SECONDS)) {
                prometheus.destroyForcibly();
                prometheus.waitFor(5, TimeUnit.SECONDS);
            }
        }
        for (ChildJvm server : servers) {
            server.close();
        }
        http.close();
    }

    @Test
    void prometheusScrapesTwoServersDuringPullsAndPushes() throws Exception {
        String binary = findPrometheus();
        long pid = ProcessHandle.current().pid();
        int[] metricsPorts = {freePort(), freePort()};
        List<String> addresses = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            // shm names its region after the host: each server its own loopback address
            String host = "127." + ((pid >> 8) & 0xff) + "." + (pid & 0xff) + "." + (i + 2);
            ChildJvm server = ChildJvm.start(ChildJvm.javaCommand(List.of("-Xmx512m", "-XX:+UseSerialGC"),
                    FerryCommand.class.getName(), List.of("server", "--transport", "shm", "--bind-host", host,
                            "--index", Integer.toString(i), "--servers", "2", "--no-auth",
                            "--metrics-port", Integer.toString(metricsPorts[i]), "--exit-on-stdin-eof")),
                    "server " + i);
            servers.add(server);
        }
        for (ChildJvm server : servers) {
            addresses.add(server.expect(PsServerMain.LISTENING, 60_000).substring(PsServerMain.LISTENING.length()).trim());
        }
        for (int port : metricsPorts) {
            assertEquals(200, get("http://127.0.0.1:" + port + "/healthz").statusCode());
        }
        int prometheusPort = freePort();
        startPrometheus(binary, prometheusPort, metricsPorts);

        RpcConfig rpc = RpcConfig.defaults().withoutAuthentication().withDefaultDeadlineMillis(30_000)
                .withHeartbeat(500, 30_000);
        TransportConfig transport = TransportConfig.defaults("shm").withConnectTimeoutMillis(10_000);
        try (PsClient client = PsClient.connect(rpc, transport, addresses)) {
            client.createTable(TableConfig.of(TABLE, DIMENSION, Optimizer.sgd(0.1)).withMaxRows(1 << 16));
            // Every id once (the rows the servers then hold, exactly), then pulls and pushes for a few seconds.
            long[] batch = new long[100];
            for (int from = 0; from < IDS; from += batch.length) {
                for (int j = 0; j < batch.length; j++) {
                    batch[j] = from + j;
                }
                client.pull(TABLE, batch);
            }
            int pushes = 0;
            // At least 6 s of traffic, and on until Prometheus holds two samples of each target
            // in the rate window (a loaded host delays scrapes), at most 60 s.
            long start = System.nanoTime();
            long nextCheck = start + TimeUnit.SECONDS.toNanos(6);
            String pullRateQuery =
                    "sum by (instance) (rate(ferry_rpc_server_handler_seconds_count{method=\"pull\",outcome=\"ok\"}[10s]))";
            Map<String, Double> pullRate = Map.of();
            java.util.Random random = new java.util.Random(7);
            while (true) {
                for (int j = 0; j < batch.length; j++) {
                    batch[j] = random.nextInt(IDS);
                }
                client.pull(TABLE, batch);
                client.push(TABLE, new long[] {random.nextInt(IDS)}, new float[DIMENSION]);
                pushes++;
                long now = System.nanoTime();
                if (now - nextCheck >= 0) {
                    pullRate = query(prometheusPort, pullRateQuery);
                    if (pullRate.size() == 2 || now - start > TimeUnit.SECONDS.toNanos(60)) {
                        break;
                    }
                    nextCheck = now + TimeUnit.MILLISECONDS.toNanos(500);
                }
            }
            assertEquals(2, query(prometheusPort, "up{job=\"ferry\"} == 1").size(), "both targets up");
            Map<String, Double> pullRates = pullRate;
            assertEquals(2, pullRates.size(), pullRates::toString);
            pullRates.values().forEach(v -> assertTrue(v > 0, "pull rate " + pullRates));
            Map<String, Double> p99 = query(prometheusPort, "histogram_quantile(0.99, sum by (le) "
                    + "(rate(ferry_rpc_server_handler_seconds_bucket{method=\"pull\"}[10s])))");
            double pull99 = p99.values().iterator().next();
            assertTrue(pull99 > 0 && pull99 < 10, "pull p99 " + pull99 + " s");
            awaitValue(prometheusPort, "sum(ferry_ps_table_rows{table=\"" + TABLE + "\"})", v -> v == IDS);
            int pushed = pushes;
            awaitValue(prometheusPort, "sum(ferry_rpc_server_handler_seconds_count{method=\"push\",outcome=\"ok\"})",
                    v -> v == pushed);
            awaitValue(prometheusPort, "sum(ferry_transport_links_open{role=\"server\"})", v -> v >= 2);
            awaitValue(prometheusPort, "sum(ferry_memory_registered_bytes{role=\"server\"})", v -> v > 0);

            dashboardQueriesWork(prometheusPort, client, metricsPorts);

            String stat = stat(metricsPorts);
            assertTrue(stat.contains("\"state\":\"ready\""), stat);
            assertTrue(stat.contains("\"method\":\"pull\""), stat);
            assertTrue(stat.contains("{\"table\":\"" + TABLE + "\",\"rows\":"), stat);

            // Hold every response: the servers run out of credits on their links to the client. (A loaded
            // machine may show a few stalls before: the client's progress thread reposting late.)
            String stallQuery = "ferry_transport_credit_stalls_total{role=\"server\",provider=\"shm\"}";
            Map<String, Double> before = query(prometheusPort, stallQuery);
            assertEquals(2, before.size(), before::toString);
            List<CompletableFuture<PsClient.PullView>> held = new ArrayList<>();
            for (int i = 0; i < 600; i++) {
                held.add(client.pullView(TABLE, new long[] {i}));
            }
            try {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
                Map<String, Double> stalls = query(prometheusPort, stallQuery);
                while (!allAbove(stalls, before) && System.nanoTime() - deadline < 0) {
                    Thread.sleep(250);
                    stalls = query(prometheusPort, stallQuery);
                }
                stalls = query(prometheusPort, stallQuery);
                for (String server : before.keySet()) {
                    assertTrue(stalls.get(server) > before.get(server), "credit stalls on " + server + ": before "
                            + before + ", holding " + stalls);
                }
            } finally {
                for (CompletableFuture<PsClient.PullView> f : held) {
                    f.thenAccept(PsClient.PullView::close);
                }
            }
            for (CompletableFuture<PsClient.PullView> f : held) {
                f.get(30, TimeUnit.SECONDS); // each completes once buffers come back, and is closed
            }
        }
    }

    /**
     * Every query of docs/grafana-ferry.json is valid PromQL here, and every series it names is
     * one that servers or clients export.
     */
    private void dashboardQueriesWork(int prometheusPort, PsClient client, int[] metricsPorts) throws Exception {
        String dashboard = Files.readString(Path.of("..", "docs", "grafana-ferry.json"));
        dev.ferry.metrics.FerryMetrics clientSide = dev.ferry.metrics.FerryMetrics.prometheus();
        clientSide.bind(client.rpcClient());
        java.util.Set<String> exported = new java.util.HashSet<>(names(clientSide.scrape()));
        exported.addAll(names(get("http://127.0.0.1:" + metricsPorts[0] + "/metrics").body()));
        Matcher expr = Pattern.compile("\"expr\": \"((?:[^\"\\\\]|\\\\.)*)\"").matcher(dashboard);
        int queries = 0;
        int withData = 0;
        while (expr.find()) {
            String promql = expr.group(1).replace("\\\"", "\"").replace("$instance", ".*");
            Matcher name = Pattern.compile("ferry_[a-z_]+").matcher(promql);
            while (name.find()) {
                assertTrue(exported.contains(name.group()), "the dashboard names " + name.group()
                        + ", which nothing exports");
            }
            queries++;
            if (!query(prometheusPort, promql).isEmpty()) {
                withData++;
            }
        }
        assertTrue(queries >= 25, queries + " queries");
        assertTrue(withData >= queries / 2, withData + " of " + queries + " dashboard queries have data");
    }

    private static java.util.List<String> names(String exposition) {
        java.util.List<String> names = new ArrayList<>();
        for (String line : exposition.split("\n")) {
            if (!line.startsWith("#") && !line.isBlank()) {
                int end = line.indexOf('{') >= 0 ? line.indexOf('{') : line.indexOf(' ');
                names.add(line.substring(0, end));
            }
        }
        return names;
    }

    private static boolean allAbove(Map<String, Double> now, Map<String, Double> before) {
        return before.keySet().stream().allMatch(k -> now.getOrDefault(k, -1.0) > before.get(k));
    }

    private String stat(int[] ports) {
        StringWriter out = new StringWriter();
        int status = new CommandLine(new StatCommand()).setOut(new PrintWriter(out, true)).execute("--once", "--json",
                "--interval", "0.5", "127.0.0.1:" + ports[0], "127.0.0.1:" + ports[1]);
        assertEquals(0, status, out::toString);
        return out.toString();
    }

    private void startPrometheus(String binary, int port, int[] targets) throws Exception {
        Path config = dir.resolve("prometheus.yml");
        Files.writeString(config, """
                global:
                  scrape_interval: 1s
                  evaluation_interval: 1s
                scrape_configs:
                  - job_name: ferry
                    static_configs:
                      - targets: ['127.0.0.1:%d', '127.0.0.1:%d']
                """.formatted(targets[0], targets[1]));
        prometheus = new ProcessBuilder(binary, "--config.file=" + config, "--storage.tsdb.path=" + dir.resolve("data"),
                "--web.listen-address=127.0.0.1:" + port, "--log.level=warn")
                .redirectErrorStream(true).redirectOutput(dir.resolve("prometheus.log").toFile()).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            try {
                if (get("http://127.0.0.1:" + port + "/-/ready").statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                // not listening yet
            }
            if (!prometheus.isAlive() || System.nanoTime() - deadline > 0) {
                throw new AssertionError("prometheus did not become ready: "
                        + Files.readString(dir.resolve("prometheus.log")));
            }
            Thread.sleep(100);
        }
    }

    /** Waits (at most 15 s, a scrape a second) until the query's one value passes {@code test}. */
    private void awaitValue(int port, String promql, DoublePredicate test) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        Map<String, Double> last = Map.of();
        while (System.nanoTime() - deadline < 0) {
            last = query(port, promql);
            if (last.size() == 1 && test.test(last.values().iterator().next())) {
                return;
            }
            Thread.sleep(250);
        }
        throw new AssertionError(promql + " never passed; last " + last);
    }

    private static final Pattern SAMPLE = Pattern.compile("\\{\"metric\":\\{([^}]*)\\},\"value\":\\[[0-9.]+,\"([^\"]+)\"\\]\\}");

    /** An instant query's vector: labels to value. */
    private Map<String, Double> query(int port, String promql) throws Exception {
        HttpResponse<String> r = get("http://127.0.0.1:" + port + "/api/v1/query?query="
                + URLEncoder.encode(promql, StandardCharsets.UTF_8));
        assertEquals(200, r.statusCode(), r::body);
        assertTrue(r.body().contains("\"status\":\"success\""), r.body());
        Map<String, Double> out = new LinkedHashMap<>();
        Matcher m = SAMPLE.matcher(r.body());
        while (m.find()) {
            out.put(m.group(1), Double.parseDouble(m.group(2)));
        }
        return out;
    }

    private HttpResponse<String> get(String url) throws IOException, InterruptedException {
        return http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    private static String findPrometheus() {
        for (String d : System.getenv().getOrDefault("PATH", "/usr/bin").split(":")) {
            Path p = Path.of(d, "prometheus");
            if (Files.isExecutable(p)) {
                return p.toString();
            }
        }
        throw new AssertionError("prometheus is not installed: bin/setup or bin/test installs it "
                + "(apt-get install prometheus)");
    }
}
