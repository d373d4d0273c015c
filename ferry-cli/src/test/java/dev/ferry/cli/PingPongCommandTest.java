package dev.ferry.cli;

import dev.ferry.bench.pingpong.ControlLine;
import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.bench.pingpong.PingPongSpec;
import dev.ferry.ps.net.ChildJvm;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code ferry bench pingpong} end to end, short: a server child per run, a couple of hundred
 * round trips on shm, tcp and netty, the JSON checked, and the child gone afterwards.
 */
@Timeout(60)
class PingPongCommandTest {

    private static final Pattern MEMBER = Pattern.compile("\"(\\w+)\":(\"[^\"]*\"|-?[0-9.]+)");

    /** What running the command line printed, and its exit status. */
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
        Map<String, String> members = new java.util.HashMap<>();
        Matcher m = MEMBER.matcher(line);
        while (m.find()) {
            members.put(m.group(1), m.group(2).replace("\"", ""));
        }
        return members;
    }

    @ParameterizedTest(name = "{0} {1}")
    @CsvSource({"shm, rdm", "tcp, msg", "netty, tcp"})
    void pingPongPrintsSaneJsonAndLeavesNoChild(String provider, String endpoint) {
        List<String> args = new ArrayList<>(List.of("bench", "pingpong", "--provider", provider, "--size", "64",
                "--iterations", "200", "--warmup", "100", "--warmup-ms", "0", "--json"));
        Run run = ferry(args.toArray(String[]::new));
        assertEquals(0, run.status(), run.err());
        Map<String, String> result = json(run.lastLine());
        for (String key : List.of("transport", "provider", "endpoint", "size", "iterations", "mean_us", "p50_us",
                "p99_us", "p999_us", "server_pid")) {
            assertTrue(result.containsKey(key), key + " missing in " + run.lastLine());
        }
        assertEquals(provider, result.get("provider"));
        assertEquals(endpoint, result.get("endpoint"));
        assertEquals(provider.equals("netty") ? "netty" : "fabric", result.get("transport"));
        assertEquals("64", result.get("size"));
        assertEquals("200", result.get("iterations"));
        double mean = Double.parseDouble(result.get("mean_us"));
        double p50 = Double.parseDouble(result.get("p50_us"));
        double p99 = Double.parseDouble(result.get("p99_us"));
        double p999 = Double.parseDouble(result.get("p999_us"));
        assertTrue(mean > 0 && p50 > 0, run.lastLine());
        assertTrue(p50 <= p99 && p99 <= p999, run.lastLine());
        assertTrue(p999 < 10_000_000, "a round trip over 10 s: " + run.lastLine());
        long pid = Long.parseLong(result.get("server_pid"));
        assertTrue(pid > 0, run.lastLine());
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "server child " + pid + " alive");
    }

    @Test
    void aServerLeftWaitingIsStoppedByItsPid() {
        PingPongSpec spec = PingPongSpec.of("shm", null, 64, 1, 0);
        List<String> args = new ArrayList<>(List.of("bench", PingPongServerCommand.NAME));
        args.addAll(PingPong.serverArguments(spec));
        long pid;
        try (ChildJvm server = ChildJvm.start(
                ChildJvm.javaCommand(List.of(), FerryCommand.class.getName(), args), "test server")) {
            pid = server.pid();
            server.expect(ControlLine.ADDRESS, 20_000);
            assertTrue(server.isAlive());
            // The server now waits for its peer's address, which never comes.
        }
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "server child " + pid + " alive");
    }

    @ParameterizedTest(name = "{0}")
    @CsvSource(delimiter = '|', value = {
        "bench pingpong --provider nope|unknown provider 'nope'",
        "bench pingpong --size -1|size must not be negative",
        "bench pingpong --size 65m|exceeds the limit",
        "bench pingpong --size 100000000|exceeds the limit",
        "bench pingpong --provider shm --endpoint msg|shm offers rdm endpoints only",
        "bench pingpong --iterations 0|iterations must be positive",
        "bench pingpong --provider netty --compare-c|not netty",
        "bench nope|Unmatched argument"})
    void badInputIsOneLineAndStatusTwo(String commandLine, String expected) {
        Run run = ferry(commandLine.split(" "));
        assertEquals(2, run.status(), run.out() + run.err());
        String err = run.err().strip();
        assertFalse(err.contains("\n"), "more than one line: " + err);
        assertTrue(err.contains(expected), err);
    }

    @Test
    void helpIsClean() {
        Run top = ferry("--help");
        assertEquals(0, top.status());
        assertTrue(top.out().contains("bench") && top.out().contains("demo"), top.out());
        Run bench = ferry("bench", "--help");
        assertEquals(0, bench.status());
        assertTrue(bench.out().contains("pingpong"), bench.out());
        assertFalse(bench.out().contains(PingPongServerCommand.NAME), "the server subcommand is internal");
        Run pingPong = ferry("bench", "pingpong", "--help");
        assertEquals(0, pingPong.status());
        assertTrue(pingPong.out().contains("--transport") && pingPong.out().contains("--json"), pingPong.out());
    }
}
