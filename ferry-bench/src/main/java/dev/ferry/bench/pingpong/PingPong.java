package dev.ferry.bench.pingpong;

import dev.ferry.ps.net.ChildJvm;
import dev.ferry.fabric.EndpointType;
import java.io.InputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;

/**
 * The ping-pong benchmark: {@link #run} is the client, which starts the server as a child JVM on
 * this JVM's java and class path and measures against it; {@link #serve} is the server's body,
 * which the child's main method calls.
 */
public final class PingPong {

    /** The JVM options the server child runs with: the GC the launcher uses, a small heap. */
    private static final List<String> SERVER_JVM_OPTIONS = List.of("-XX:+UseParallelGC", "-Xms64m", "-Xmx512m");

    private final String serverMainClass;
    private final List<String> serverSubcommand;

    /**
     * A benchmark whose server runs as {@code java ... serverMainClass serverSubcommand <options>},
     * where the options are those {@link #serverArguments} makes.
     */
    public PingPong(String serverMainClass, List<String> serverSubcommand) {
        this.serverMainClass = serverMainClass;
        this.serverSubcommand = List.copyOf(serverSubcommand);
    }

    /** The options that tell a server child what {@code spec} asks, as {@link #serve} expects them. */
    public static List<String> serverArguments(PingPongSpec spec) {
        List<String> args = new ArrayList<>(List.of("--provider", spec.provider()));
        if (!spec.isNetty()) {
            args.add("--endpoint");
            args.add(spec.endpointName());
        }
        args.addAll(List.of("--size", Integer.toString(spec.size()),
                "--cpu", Integer.toString(CpuAffinity.serverCpu(spec.pin())),
                "--timeout-ms", Long.toString(spec.timeoutMillis())));
        return args;
    }

    /**
     * Runs {@code spec}: starts the server child, measures, and stops the child whatever happens.
     *
     * @throws RuntimeException with a one-line message if the provider is missing, the server
     *     fails, or a reply does not come
     */
    public PingPongResult run(PingPongSpec spec) {
        List<String> args = new ArrayList<>(serverSubcommand);
        args.addAll(serverArguments(spec));
        List<String> command = ChildJvm.javaCommand(ChildJvm.serverJvmOptions(SERVER_JVM_OPTIONS), serverMainClass, args);
        try (ChildJvm server = ChildJvm.start(command, "ping-pong server")) {
            PingPongResult result = onClientThread(spec, server);
            server.awaitExit(spec.timeoutMillis());
            return result;
        }
    }

    /**
     * Measures on a thread of its own, so that pinning it leaves the caller's thread alone.
     */
    private static PingPongResult onClientThread(PingPongSpec spec, ChildJvm server) {
        AtomicReference<PingPongResult> result = new AtomicReference<>();
        AtomicReference<RuntimeException> failure = new AtomicReference<>();
        Thread client = new Thread(() -> {
            try {
                int cpu = CpuAffinity.clientCpu(spec.pin());
                if (cpu >= 0) {
                    CpuAffinity.pinCurrentThread(cpu);
                }
                result.set(spec.isNetty() ? NettyPingPong.runClient(spec, server) : fabricClient(spec, server));
            } catch (RuntimeException | Error e) {
                failure.set(e instanceof RuntimeException r ? r : new IllegalStateException(e.toString(), e));
            }
        }, "ferry-pingpong-client");
        client.start();
        try {
            client.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted");
        }
        if (failure.get() != null) {
            throw failure.get();
        }
        return result.get();
    }

    /**
     * Tells the server the client is done and returns its allocation figure. Called before the
     * client closes its side: a connection closed first could reach the server as failed
     * receives before DONE does.
     */
    static double finish(ChildJvm server, long timeoutMillis) {
        server.send(ControlLine.DONE);
        return Double.parseDouble(ControlLine.argument(server.expect(ControlLine.STATS, timeoutMillis)));
    }

    private static PingPongResult fabricClient(PingPongSpec spec, ChildJvm server) {
        byte[] serverAddress = ControlLine.bytes(server.expect(ControlLine.ADDRESS, ChildJvm.startMillis(spec.timeoutMillis())));
        try (FabricPingPong side = FabricPingPong.open(spec.provider(), spec.endpoint(), spec.size(), false)) {
            int timeout = (int) Math.min(Integer.MAX_VALUE, spec.timeoutMillis());
            if (spec.endpoint() == EndpointType.RDM) {
                server.send(ControlLine.of(ControlLine.PEER, side.address()));
            }
            side.connect(serverAddress, timeout);
            server.expect(ControlLine.READY, spec.timeoutMillis());
            Histogram histogram = new Histogram(FabricPingPong.HIGHEST_NANOS, 3);
            FabricPingPong.ClientRun run = side.runClient(spec.warmup(), spec.warmupMillis() * 1_000_000L,
                    spec.iterations(), histogram, spec.timeoutMillis() * 1_000_000L, server::isAlive,
                    () -> server.send(ControlLine.TIMED));
            double serverAlloc = finish(server, spec.timeoutMillis());
            return PingPongResult.of(spec, run.warmupRoundTrips(), histogram,
                    Allocation.perOperation(run.allocatedBytes(), spec.iterations()), serverAlloc)
                    .withServerPid(server.pid());
        }
    }

    /**
     * The server's body: serves {@code spec} to the client on the other end of {@code in} and
     * {@code out}, pinned to {@code cpu} (unless -1).
     *
     * @return the exit status: 0 when every round trip was served, 1 on failure (reported as an
     *     {@code ERROR} line)
     */
    public static int serve(PingPongSpec spec, int cpu, InputStream in, PrintStream out) {
        ControlChannel control = new ControlChannel(in, out);
        try {
            if (cpu >= 0) {
                CpuAffinity.pinCurrentThread(cpu);
            }
            if (spec.isNetty()) {
                NettyPingPong.serve(spec, control);
                return 0;
            }
            return serveFabric(spec, control);
        } catch (RuntimeException | LinkageError | InterruptedException e) {
            control.send(ControlLine.ERROR + " " + ControlLine.oneLine(message(e)));
            return 1;
        }
    }

    private static int serveFabric(PingPongSpec spec, ControlChannel control) throws InterruptedException {
        int timeout = (int) Math.min(Integer.MAX_VALUE, spec.timeoutMillis());
        try (FabricPingPong side = FabricPingPong.open(spec.provider(), spec.endpoint(), spec.size(), true)) {
            control.send(ControlLine.of(ControlLine.ADDRESS, side.address()));
            if (spec.endpoint() == EndpointType.RDM) {
                side.connect(ControlLine.bytes(control.expect(ControlLine.PEER, spec.timeoutMillis())), timeout);
            } else {
                side.accept(timeout);
            }
            control.send(ControlLine.READY);
            FabricPingPong.ServerRun run = side.serve(control);
            control.send(ControlLine.STATS + " " + String.format(Locale.ROOT, "%.2f",
                    Allocation.perOperation(run.allocatedBytes(), run.timedMessages())));
            return 0;
        }
    }

    /** An exception's message, or its class name when it has none. */
    public static String message(Throwable t) {
        String m = t.getMessage();
        return m == null || m.isBlank() ? t.getClass().getSimpleName() : m;
    }
}
