package dev.ferry.cli;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code ferry bench rpc} end to end, short: a server child per run, half a second of calls on
 * shm, tcp and netty, the JSON checked, the progress lines seen, and the child gone afterwards.
 */
@Timeout(120)
class RpcBenchCommandTest {

    private static final Pattern MEMBER = Pattern.compile("\"(\\w+)\":(\"[^\"]*\"|-?[0-9.]+)");

    private record Run(int status, String out, String err) {
        String lastLine() {
            String[] lines = out.strip().split("\n");
            return lines[lines.length - 1];
        }
    }

    private static Run ferry(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = FerryCommand.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(args);
        return new Run(status, out.toString(), err.toString());
    }

    private static Map<String, String> json(String line) {
        assertTrue(line.startsWith("{") && line.endsWith("}"), "not a JSON object: " + line);
        Map<String, String> members = new HashMap<>();
        Matcher m = MEMBER.matcher(line);
        while (m.find()) {
            members.put(m.group(1), m.group(2).replace("\"", ""));
        }
        return members;
    }

    @ParameterizedTest(name = "{0} x{1}")
    @CsvSource({"shm, 1, 64", "tcp, 2, 64", "netty, 2, 4096"})
    void rpcBenchPrintsSaneJsonAndLeavesNoChild(String transport, int concurrency, int size) {
        Run run = ferry("bench", "rpc", "--transport", transport, "--size", Integer.toString(size), "--concurrency",
                Integer.toString(concurrency), "--warmup-ms", "300", "--warmup-calls", "2000", "--duration-ms", "700", "--json");
        assertEquals(0, run.status(), run.err());
        Map<String, String> result = json(run.lastLine());
        for (String key : List.of("benchmark", "transport", "provider", "size", "concurrency", "calls", "seconds",
                "calls_per_s", "warmup_calls", "warmup_min_calls", "mean_us", "p50_us", "p99_us", "p999_us", "min_us", "max_us", "server_pid")) {
            assertTrue(result.containsKey(key), key + " missing in " + run.lastLine());
        }
        assertEquals("rpc", result.get("benchmark"));
        assertEquals(transport, result.get("provider"));
        assertEquals(transport.equals("netty") ? "netty" : "fabric", result.get("transport"));
        assertEquals(Integer.toString(size), result.get("size"));
        assertEquals(Integer.toString(concurrency), result.get("concurrency"));
        long calls = Long.parseLong(result.get("calls"));
        double seconds = Double.parseDouble(result.get("seconds"));
        double perSecond = Double.parseDouble(result.get("calls_per_s"));
        double min = Double.parseDouble(result.get("min_us"));
        double mean = Double.parseDouble(result.get("mean_us"));
        double p50 = Double.parseDouble(result.get("p50_us"));
        double p99 = Double.parseDouble(result.get("p99_us"));
        double p999 = Double.parseDouble(result.get("p999_us"));
        double max = Double.parseDouble(result.get("max_us"));
        assertTrue(calls > 0, run.lastLine());
        // The warm-up ran past its 300 ms until its 2,000 calls were made.
        assertEquals("2000", result.get("warmup_min_calls"), run.lastLine());
        assertTrue(Long.parseLong(result.get("warmup_calls")) >= 2_000, run.lastLine());
        assertTrue(seconds >= 0.7, run.lastLine());
        assertEquals(calls / seconds, perSecond, Math.max(1, perSecond * 0.001), run.lastLine());
        assertTrue(0 < min && min <= p50 && p50 <= p99 && p99 <= p999 && p999 <= max * 1.001, run.lastLine());
        assertTrue(min <= mean && mean <= max, run.lastLine());
        assertTrue(run.err().contains("measuring"), "no progress line: " + run.err());
        long pid = Long.parseLong(result.get("server_pid"));
        assertTrue(pid > 0, run.lastLine());
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "server child " + pid + " alive");
    }

    @Test
    void comparePingPongRunsPairsAndPrintsTheirRatios() {
        Run run = ferry("bench", "rpc", "--transport", "shm", "--compare-pingpong", "--runs", "2", "--warmup-ms", "200",
                "--warmup-calls", "2000", "--duration-ms", "400", "--json");
        assertEquals(0, run.status(), run.err());
        Map<String, String> result = json(run.lastLine());
        assertEquals("rpc-vs-pingpong", result.get("benchmark"));
        assertEquals("shm", result.get("provider"));
        assertEquals("2", result.get("runs"));
        double[] pings = numbers(run.lastLine(), "pingpong_p50_us");
        double[] rpcs = numbers(run.lastLine(), "rpc_p50_us");
        double[] ratios = numbers(run.lastLine(), "ratios");
        assertEquals(2, pings.length, run.lastLine());
        assertEquals(2, rpcs.length, run.lastLine());
        assertEquals(2, ratios.length, run.lastLine());
        for (int i = 0; i < 2; i++) {
            assertTrue(pings[i] > 0 && rpcs[i] > 0, run.lastLine());
            assertEquals(rpcs[i] / pings[i], ratios[i], 0.002 + ratios[i] * 0.002, run.lastLine());
            assertTrue(run.out().contains("pair " + (i + 1) + "/2: pingpong p50 "), run.out());
        }
        double best = Double.parseDouble(result.get("best_ratio"));
        double median = Double.parseDouble(result.get("median_ratio"));
        double worst = Double.parseDouble(result.get("worst_ratio"));
        assertEquals(Math.min(ratios[0], ratios[1]), best, 0.001, run.lastLine());
        assertEquals(Math.max(ratios[0], ratios[1]), worst, 0.001, run.lastLine());
        assertEquals((ratios[0] + ratios[1]) / 2, median, 0.001, run.lastLine());
        assertTrue(run.out().contains("rpc p50 over pingpong p50, shm, 64 B, 2 pairs: best "), run.out());
    }

    /** The numbers of a JSON array member {@code key} in {@code line}. */
    private static double[] numbers(String line, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":\\[([^\\]]*)\\]").matcher(line);
        assertTrue(m.find(), key + " missing in " + line);
        return java.util.Arrays.stream(m.group(1).split(",")).mapToDouble(Double::parseDouble).toArray();
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {
        "bench rpc --transport nope|unknown transport 'nope'",
        "bench rpc --size 17m|exceeds the limit",
        "bench rpc --concurrency 0|concurrency must be 1..256",
        "bench rpc --duration-ms 0|duration must be positive",
        "bench rpc --warmup-calls -1|warm-up calls must not be negative",
        "bench rpc --compare-pingpong --concurrency 2|drop --concurrency 2",
        "bench rpc --compare-pingpong --runs 0|runs must be 1..100"})
    void badInputIsOneLineAndStatusTwo(String caseLine) {
        String[] parts = caseLine.split("\\|");
        Run run = ferry(parts[0].split(" "));
        assertEquals(2, run.status(), run.out() + run.err());
        String err = run.err().strip();
        assertFalse(err.contains("\n"), "more than one line: " + err);
        assertTrue(err.contains(parts[1]), err);
    }

    @Test
    void listedInBenchHelp() {
        Run bench = ferry("bench", "--help");
        assertEquals(0, bench.status());
        assertTrue(bench.out().contains("rpc"), bench.out());
        Run rpc = ferry("bench", "rpc", "--help");
        assertEquals(0, rpc.status());
        assertTrue(rpc.out().contains("--transport") && rpc.out().contains("--concurrency")
                && rpc.out().contains("--json"), rpc.out());
    }
}
