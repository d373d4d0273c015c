package dev.ferry.bench.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The commands parse as the CLI will register them: subcommands of a {@code bench} command. */
class OptionsTest {

    @Command(name = "bench", subcommands = {FetchBenchmark.class, PushBenchmark.class})
    static final class Bench {
    }

    @Test
    void fetchOptionsParse() {
        FetchBenchmark fetch = new FetchBenchmark();
        new CommandLine(fetch).parseArgs("--transports", "shm,grpc", "--batch", "64", "--rate", "2000",
                "--distribution", "uniform", "--warmup", "2");
        FetchOptions o = fetch.options;
        assertEquals(List.of(BenchTransport.SHM, BenchTransport.GRPC), o.common.transportList());
        assertEquals(64, o.minBatch());
        assertEquals(64, o.maxBatch());
        assertEquals(64, o.concurrencyPerThread());
        assertEquals(0, o.alpha());
        assertEquals(2, o.common.warmup(FetchOptions.WARMUP_SECONDS));
        o.check();
    }

    @Test
    void defaultsAreTheIssues() {
        FetchOptions fetch = new FetchOptions();
        assertEquals(4, fetch.clients);
        assertEquals(2, fetch.common.servers);
        assertEquals(64, fetch.common.dimension);
        assertEquals(1.09, fetch.alpha());
        assertEquals(16, fetch.minBatch());
        assertEquals(4096, fetch.maxBatch());
        assertEquals(1, fetch.concurrencyPerThread());
        assertEquals(BenchTransport.ALL, fetch.common.transportList());
        PushOptions push = new PushOptions();
        assertEquals(16, push.workers);
        assertEquals(4096, push.batch);
        assertEquals(2, push.flowControlModes().length);
    }

    @Test
    void theProgressThreadsNiceValueReachesTheChildJvmsAndIsChecked() {
        PushBenchmark push = new PushBenchmark();
        new CommandLine(push).parseArgs("--progress-nice", "-10", "--child-jvm-options", "-Xmx1g");
        push.options.check();
        assertEquals(List.of("-Xmx1g", "-Dferry.transport.progressNice=-10"), push.options.common.childJvm());
        PushBenchmark plain = new PushBenchmark();
        new CommandLine(plain).parseArgs();
        assertEquals(List.of("-Xms256m", "-Xmx2g"), plain.options.common.childJvm(), "0 adds nothing");
        for (String bad : List.of("-21", "20")) {
            PushBenchmark p = new PushBenchmark();
            new CommandLine(p).parseArgs("--progress-nice", bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, p.options::check);
            assertTrue(e.getMessage().contains("--progress-nice"), e.getMessage());
        }
    }

    @Test
    void theNetlabTakesOnlyTransportsThatCrossANetwork() {
        PushBenchmark push = new PushBenchmark();
        new CommandLine(push).parseArgs("--network", "netlab", "--transports", "tcp,netty,grpc", "--netlab-hosts", "8");
        push.options.check();
        assertTrue(push.options.common.netlab());
        assertEquals(8, push.options.common.netlabHosts);
        for (String bad : List.of("shm", "direct", "local")) {
            PushBenchmark p = new PushBenchmark();
            new CommandLine(p).parseArgs("--network", "netlab", "--transports", "tcp," + bad);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, p.options::check);
            assertTrue(e.getMessage().contains(bad), e.getMessage());
        }
        PushBenchmark p = new PushBenchmark();
        new CommandLine(p).parseArgs("--network", "wan");
        assertThrows(IllegalArgumentException.class, p.options::check);
    }

    @Test
    void aFerryTransportKeepsTheParameterServersSettings() {
        for (boolean flowControl : new boolean[] {true, false}) {
            dev.ferry.transport.TransportConfig tuned = BenchTransport.SHM.config(flowControl, "127.0.0.1", true);
            assertEquals(dev.ferry.ps.net.PsTransport.EAGER_BYTES, tuned.eagerThreshold());
            assertEquals(dev.ferry.ps.net.PsTransport.IDLE_POLL_MICROS, tuned.idlePollMicros(), "idle polling, tuned");
            dev.ferry.transport.TransportConfig plain = BenchTransport.TCP.config(flowControl, "127.0.0.1", false);
            assertEquals(dev.ferry.transport.TransportConfig.defaults("tcp").idlePollMicros(), plain.idlePollMicros(),
                    "idle polling, defaults");
        }
    }

    @Test
    void registersUnderBench() {
        CommandLine bench = new CommandLine(new Bench());
        assertTrue(bench.getSubcommands().containsKey("fetch"));
        assertTrue(bench.getSubcommands().containsKey("push"));
        String help = bench.getSubcommands().get("push").getUsageMessage();
        assertTrue(help.contains("--flow-control") && help.contains("--workers"), help);
        bench.parseArgs("push", "--flow-control", "off", "--workers", "8");
        PushBenchmark push = bench.getSubcommands().get("push").getCommand();
        assertEquals(8, push.options.workers);
        assertEquals(1, push.options.flowControlModes().length);
    }
}
