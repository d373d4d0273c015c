package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code bin/netlab}: up then down leaves the machine as it was (no namespace, veth, qdisc or
 * process of the lab; the root settings and route restored), also after {@code up} was killed
 * half-way. Needs root; a lab of 2 senders under a prefix of its own, a few seconds.
 */
class NetlabTest {

    private static final Path NETLAB = Path.of("").toAbsolutePath().getParent().resolve("bin/netlab");
    private final String prefix = "fnlt" + ThreadLocalRandom.current().nextInt(1000, 10000);
    private final List<Process> started = new ArrayList<>();

    @BeforeEach
    void rootOnly() throws Exception {
        assumeTrue(Files.isExecutable(NETLAB), "no bin/netlab at " + NETLAB);
        assumeTrue("0".equals(run(List.of("id", "-u")).trim()), "bin/netlab needs root");
        assumeTrue(run(List.of("sh", "-c", "command -v ip && command -v tc && command -v sysctl && echo found")).contains("found"),
                "no iproute2");
    }

    @AfterEach
    void downAnyway() throws Exception {
        for (Process p : started) {
            p.destroyForcibly();
        }
        if (Files.isExecutable(NETLAB)) {
            netlab(Map.of(), "down");
        }
    }

    @Test
    @Timeout(120)
    void upThenDownLeavesTheMachineAsItWas() throws Exception {
        String before = machine();
        assertEquals(0, netlab(Map.of(), "up", "--hosts", "2").exit, "up failed");
        // Idempotent: the same options again change nothing.
        assertEquals(0, netlab(Map.of(), "up", "--hosts", "2").exit);
        String during = machine();
        assertTrue(during.contains(prefix + "-sw") && during.contains(prefix + "-s2") && during.contains(prefix + "-r"),
                during);
        assertEquals("30000", run(List.of("sysctl", "-n", "net.core.netdev_max_backlog")).trim());
        assertTrue(run(List.of("ip", "route", "show", "10.200.0.0/16")).contains("blackhole"));
        String qdisc = run(List.of("tc", "-n", prefix + "-sw", "qdisc", "show", "dev", "pr"));
        assertTrue(qdisc.contains("tbf") && qdisc.contains("rate 2Gbit"), qdisc);
        Result status = netlab(Map.of(), "status");
        assertTrue(status.exit == 0 || status.exit == 2, "status of a lab that is up: " + status.out);
        assertTrue(status.out.contains("bottleneck_drops="), status.out);
        // A process in a namespace: down stops it.
        ProcessBuilder inLab = new ProcessBuilder(NETLAB.toString(), "exec", "s1", "sleep", "600").redirectErrorStream(true);
        inLab.environment().put("NETLAB_PREFIX", prefix);
        Process sleeper = inLab.start();
        started.add(sleeper);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (run(List.of("ip", "netns", "pids", prefix + "-s1")).isBlank() && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        assertFalse(run(List.of("ip", "netns", "pids", prefix + "-s1")).isBlank(), "the sleeper never started");

        assertEquals(0, netlab(Map.of(), "down").exit);
        assertTrue(sleeper.waitFor(10, TimeUnit.SECONDS), "a process of the lab survived down");
        assertEquals(before, machine());
        assertEquals(1, netlab(Map.of(), "status").exit, "status after down");
        assertEquals(0, netlab(Map.of(), "down").exit, "down twice");
        assertEquals(before, machine());
    }

    @Test
    @Timeout(120)
    void downRestoresTheMachineAfterUpWasKilledHalfWay() throws Exception {
        String before = machine();
        for (String step : List.of("route", "hosts", "qdisc")) {
            Result crashed = netlab(Map.of("NETLAB_CRASH_AT", step), "up", "--hosts", "2");
            assertEquals(137, crashed.exit, "up was to be killed at " + step + ": " + crashed.out);
            assertEquals(1, netlab(Map.of(), "status").exit, "a half-built lab is not up");
            assertEquals(0, netlab(Map.of(), "down").exit);
            assertEquals(before, machine(), "after a crash at " + step);
        }
        // And up after a crash that nobody cleaned builds a whole lab.
        netlab(Map.of("NETLAB_CRASH_AT", "hosts"), "up", "--hosts", "2");
        assertEquals(0, netlab(Map.of(), "up", "--hosts", "2").exit);
        assertTrue(machine().contains(prefix + "-s2"));
        assertEquals(0, netlab(Map.of(), "down").exit);
        assertEquals(before, machine());
    }

    /** Everything of the root namespace that the lab may touch, and its namespaces. */
    private String machine() throws Exception {
        StringBuilder s = new StringBuilder();
        s.append("links:\n").append(run(List.of("sh", "-c", "ip -o link show | awk '{print $2}'")));
        s.append("qdiscs:\n").append(run(List.of("sh", "-c", "tc qdisc show | awk '{print $1, $2, $5}'")));
        s.append("route:\n").append(run(List.of("ip", "route", "show", "10.200.0.0/16")));
        for (String key : List.of("net.core.netdev_max_backlog", "net.ipv4.tcp_allowed_congestion_control",
                "net.ipv4.tcp_congestion_control")) {
            s.append(key).append('=').append(run(List.of("sysctl", "-n", key)));
        }
        s.append("namespaces:\n");
        for (String line : run(List.of("ip", "netns", "list")).split("\n")) {
            if (line.startsWith(prefix)) {
                s.append(line).append('\n');
            }
        }
        s.append("state: ").append(Files.exists(Path.of("/run/ferry-netlab/" + prefix + ".state")));
        return s.toString();
    }

    private record Result(int exit, String out) {
    }

    private Result netlab(Map<String, String> env, String... args) throws Exception {
        List<String> command = new ArrayList<>(List.of(NETLAB.toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().put("NETLAB_PREFIX", prefix);
        pb.environment().putAll(env);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "bin/netlab " + String.join(" ", args) + " hung");
        return new Result(p.exitValue(), out);
    }

    private static String run(List<String> command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(30, TimeUnit.SECONDS);
        return out;
    }
}
