package dev.ferry.cli;

import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.bench.pingpong.PingPongSpec;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code ferry bench pingpong-server}: the server side of {@code pingpong}, which the client
 * starts as its child and talks to over standard input and output. Not for direct use.
 */
@Command(name = PingPongServerCommand.NAME, hidden = true,
        description = "The server child of pingpong; speaks a line protocol on stdin/stdout.")
final class PingPongServerCommand implements Callable<Integer> {

    static final String NAME = "pingpong-server";

    @Option(names = "--provider", required = true)
    private String provider;

    @Option(names = "--endpoint")
    private String endpoint;

    @Option(names = "--size", required = true)
    private int size;

    @Option(names = "--cpu", defaultValue = "-1")
    private int cpu;

    @Option(names = "--timeout-ms", defaultValue = "10000")
    private long timeoutMillis;

    @Override
    public Integer call() {
        // The client decides how many round trips there are; the server answers until told to stop.
        PingPongSpec spec = PingPongSpec.of(provider, endpoint, size, 1, 0)
                .withTimeoutMillis(timeoutMillis);
        return PingPong.serve(spec, cpu, System.in, System.out);
    }
}
