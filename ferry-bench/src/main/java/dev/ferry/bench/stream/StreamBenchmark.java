package dev.ferry.bench.stream;

import java.util.ArrayList;
import java.util.List;

import dev.ferry.bench.pingpong.ControlLine;
import dev.ferry.ps.net.ChildJvm;

/**
 * Runs one stream: starts the server child, measures from this process, collects the server's
 * counters and stops the child, which is gone when {@link #run} returns or throws.
 */
public final class StreamBenchmark {

    /** Environment variable with extra JVM options for the server child, split at spaces. */
    public static final String SERVER_OPTS_ENV = "FERRY_STREAM_SERVER_OPTS";

    private StreamBenchmark() {
    }

    /** Measures {@code spec}. */
    public static StreamResult run(StreamSpec spec) {
        List<String> jvm = new ArrayList<>(List.of("-XX:+UseParallelGC"));
        jvm.addAll(spec.serverJvmOptions());
        String env = System.getenv(SERVER_OPTS_ENV);
        if (env != null && !env.isBlank()) {
            jvm.addAll(List.of(env.trim().split("\\s+")));
        }
        try (ChildJvm child = ChildJvm.start(
                ChildJvm.javaCommand(jvm, StreamServer.class.getName(), StreamServer.args(spec)), "the stream server")) {
            String ready = ControlLine.argument(child.expect(StreamServer.READY,
                    ChildJvm.startMillis(spec.timeoutMillis() + 20_000)));
            Runnable mark = () -> child.send(StreamServer.COUNTERS);
            Measured m = switch (spec.implementation()) {
                case RAW -> RawStream.client(spec, child, ready, mark, mark);
                case TRANSPORT -> spec.mode() == StreamSpec.Mode.PINGPONG
                        ? TransportStream.pingPong(spec, ready, mark, mark)
                        : TransportStream.stream(spec, ready, mark, mark);
            };
            SideCounters before = SideCounters.parse(ControlLine.argument(child.expect(StreamServer.COUNTERS,
                    spec.timeoutMillis())));
            SideCounters after = SideCounters.parse(ControlLine.argument(child.expect(StreamServer.COUNTERS,
                    spec.timeoutMillis())));
            return StreamResult.of(spec, m.messages(), m.nanos(), m.latency(), m.counters(), after.minus(before),
                    m.allocBytesPerMessage(), child.pid());
        }
    }
}
