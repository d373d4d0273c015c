package dev.ferry.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code ferry demo} on the cluster path, small and short, in this JVM: embedded ZooKeeper, two
 * server processes, the fetch and push phases, a server that joins and one that leaves under the
 * exact training workload. The demo checks the exact sums itself; the test asserts its verdict,
 * that both changes happened, that no server process is left (also after a SIGTERM to a demo
 * process), and that a server that cannot start fails the demo with its reason and a non-zero
 * status.
 */
@Timeout(300)
class DemoCommandTest {

    @AfterEach
    void noServerProcessLeft() {
        assertEquals(0, ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).count(),
                "server processes left");
    }

    @Test
    void theClusterDemoChecksExactSumsAcrossAJoinAndALeave() {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = run(out, err, "--servers", "2", "--transports", "Ferry-shm=shm", "--warmup-ms", "300",
                "--settle-ms", "2500", "--phase-ms", "700", "--ids", "20000", "--exact-ids", "2000");
        String text = out.toString();
        System.out.print(text);
        assertEquals(0, status, text + err);
        assertTrue(text.contains("exact sums: OK, all 2,000 rows equal the sum of their acknowledged pushes"), text);
        Matcher joined = Pattern.compile("s2 joined in [\\d.]+ s: generation (\\d+) -> (\\d+), (\\d+) moves").matcher(text);
        assertTrue(joined.find(), text);
        assertTrue(Long.parseLong(joined.group(2)) > Long.parseLong(joined.group(1)), text);
        assertTrue(Integer.parseInt(joined.group(3)) >= 1, text);
        Matcher left = Pattern.compile("s1 left in [\\d.]+ s: generation (\\d+) -> (\\d+), (\\d+) moves; groups now "
                + "s0 512, s2 512").matcher(text);
        assertTrue(left.find(), text);
        assertTrue(Long.parseLong(left.group(2)) > Long.parseLong(left.group(1)), text);
        Matcher pushes = Pattern.compile("\\(([\\d,]+) pushes").matcher(text);
        assertTrue(pushes.find() && Long.parseLong(pushes.group(1).replace(",", "")) > 0, text);
        assertTrue(Pattern.compile("(?m)^Ferry-shm\\s+fetch\\s+\\d").matcher(text).find(), text);
        assertTrue(Pattern.compile("(?m)^Ferry-shm\\s+push\\s+\\d").matcher(text).find(), text);
        assertTrue(err.toString().contains("generation"), err.toString());
        // Each timed workload first runs until it settles, 2.5 s at most: one line per 1 s slice.
        for (String workload : new String[] {"fetch", "push"}) {
            Matcher slices = Pattern.compile("(?m)^ferry demo: Ferry-shm\\s+settle " + workload
                    + "\\s+\\d+ s\\s+[\\d,]+ calls/s").matcher(err.toString());
            int count = 0;
            while (slices.find()) {
                count++;
            }
            assertTrue(count >= 1 && count <= 3, workload + " settled in " + count + " slices:\n" + err);
        }
    }

    @Test
    void aServerThatCannotStartFailsTheDemoWithItsReason() {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = run(out, err, "--servers", "2", "--transports", "Broken=nosuch", "--warmup-ms", "100",
                "--phase-ms", "100", "--exact-ids", "100");
        assertEquals(1, status, out + "\n" + err);
        String text = err.toString();
        assertTrue(text.contains("ferry demo: failed: Broken: s0: cannot listen on nosuch"), text);
        assertFalse(out.toString().contains("exact sums"), out.toString());
    }

    /** Ctrl-C (here SIGTERM, which runs the same shutdown hooks) stops every server the demo started. */
    @Test
    void anInterruptedDemoLeavesNoServerProcess() throws Exception {
        java.nio.file.Path tmp = java.nio.file.Files.createTempDirectory("ferry-demo-test");
        List<String> command = dev.ferry.ps.net.ChildJvm.javaCommand(List.of("-Xmx256m",
                "-Djava.io.tmpdir=" + tmp), FerryCommand.class.getName(), List.of("demo", "--servers", "2",
                "--transports", "Ferry-shm=shm", "--warmup-ms", "120000", "--exact-ids", "100"));
        Process demo = new ProcessBuilder(command).redirectErrorStream(true).start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = Thread.ofPlatform().daemon().start(() -> {
            try (var in = new java.io.BufferedReader(new java.io.InputStreamReader(demo.getInputStream(),
                    java.nio.charset.StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    lines.add(line);
                }
            } catch (java.io.IOException e) {
                // the demo is gone
            }
        });
        try {
            StringBuilder seen = new StringBuilder();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
            while (seen.indexOf("client connected") < 0) {
                String line = lines.poll(1, TimeUnit.SECONDS);
                if (line != null) {
                    seen.append(line).append('\n');
                }
                assertTrue(demo.isAlive() && System.nanoTime() < deadline, "the demo did not connect:\n" + seen);
            }
            List<ProcessHandle> servers = demo.descendants().filter(ProcessHandle::isAlive).toList();
            assertEquals(2, servers.size(), "server processes while it runs: " + servers);
            demo.destroy();
            assertTrue(demo.waitFor(60, TimeUnit.SECONDS), "the demo did not end on SIGTERM");
            for (ProcessHandle server : servers) {
                server.onExit().get(30, TimeUnit.SECONDS);
                assertFalse(server.isAlive(), "server " + server.pid() + " outlived the demo");
            }
            try (var left = java.nio.file.Files.list(tmp)) {
                List<java.nio.file.Path> files = left.filter(f -> f.getFileName().toString().startsWith("ferry-demo"))
                        .toList();
                assertEquals(List.of(), files, "the demo's temporary directory outlived it");
            }
        } finally {
            demo.destroyForcibly();
            demo.waitFor(30, TimeUnit.SECONDS);
            reader.join(10_000);
            try (var walk = java.nio.file.Files.walk(tmp)) {
                walk.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static int run(StringWriter out, StringWriter err, String... args) {
        String[] all = new String[args.length + 1];
        all[0] = "demo";
        System.arraycopy(args, 0, all, 1, args.length);
        return FerryCommand.commandLine().setOut(new PrintWriter(out, true)).setErr(new PrintWriter(err, true))
                .execute(all);
    }
}
