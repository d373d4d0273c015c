package dev.ferry.bench.stream;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;

import dev.ferry.transport.Transport;

/**
 * The receiving side of a stream, as the main class of a child JVM. It speaks in lines:
 *
 * <pre>
 *   child  -&gt; parent   READY &lt;address&gt;        transport: host:port; raw: &lt;MSG|RDM&gt; &lt;hex fabric address&gt;
 *   parent -&gt; child    PEER &lt;hex&gt;              raw datagram endpoints: the client's fabric address
 *   child  -&gt; parent   CONNECTED                 raw: receives are posted, stream away
 *   parent -&gt; child    COUNTERS                  answered at once with
 *   child  -&gt; parent   COUNTERS k=v ...          (see {@link SideCounters#line()})
 *   child  -&gt; parent   ERROR &lt;message&gt;          then exits with status 1
 * </pre>
 *
 * It exits at the end of its standard input (the parent closed it, or died).
 * Arguments are {@code key=value}: {@code provider}, {@code impl} ({@code TRANSPORT} or
 * {@code RAW}), {@code mode} ({@code STREAM} or {@code PINGPONG}), {@code size}, {@code window},
 * {@code timeout}.
 */
public final class StreamServer {

    static final String READY = "READY";
    static final String PEER = "PEER";
    static final String CONNECTED = "CONNECTED";
    static final String COUNTERS = "COUNTERS";
    static final String ERROR = "ERROR";

    private static final PrintStream OUT = System.out;
    private static volatile Transport transport;

    private StreamServer() {
    }

    /** The child's arguments for {@code spec}. */
    static List<String> args(StreamSpec spec) {
        List<String> args = new ArrayList<>();
        args.add("provider=" + spec.provider());
        args.add("impl=" + spec.implementation());
        args.add("mode=" + spec.mode());
        args.add("size=" + spec.size());
        args.add("window=" + spec.effectiveWindow());
        args.add("timeout=" + spec.timeoutMillis());
        return args;
    }

    /** Prints one control line for the parent. */
    static void say(String line) {
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    /** Runs the server; see the class comment. */
    public static void main(String[] argv) {
        Map<String, String> a = new HashMap<>();
        for (String arg : argv) {
            int eq = arg.indexOf('=');
            if (eq > 0) {
                a.put(arg.substring(0, eq), arg.substring(eq + 1));
            }
        }
        int status = 0;
        try {
            StreamSpec spec = new StreamSpec(a.getOrDefault("provider", "shm"),
                    StreamSpec.Implementation.valueOf(a.getOrDefault("impl", "TRANSPORT")),
                    StreamSpec.Mode.valueOf(a.getOrDefault("mode", "STREAM")),
                    Integer.parseInt(a.getOrDefault("size", "64")), 0, 1, 0,
                    Integer.parseInt(a.getOrDefault("window", "0")), 1,
                    Long.parseLong(a.getOrDefault("timeout", "10000")), List.of());
            serve(spec);
        } catch (Throwable t) {
            String message = t.getMessage() == null ? t.toString() : t.getMessage();
            say(ERROR + " " + message.replace('\n', ' '));
            if (System.getenv("FERRY_DEBUG") != null) {
                t.printStackTrace();
            }
            status = 1;
        }
        // Transport threads (Netty's event loops) must not keep a finished child alive.
        System.exit(status);
    }

    private static void serve(StreamSpec spec) throws InterruptedException {
        LinkedBlockingQueue<String> peers = new LinkedBlockingQueue<>();
        CountDownLatch stop = new CountDownLatch(1);
        Thread control = Thread.ofPlatform().daemon().name("ferry-stream-control").start(() -> control(peers, stop));
        if (spec.implementation() == StreamSpec.Implementation.RAW) {
            RawStream.serve(spec, peers, () -> stop.getCount() == 0);
        } else {
            try (Transport t = TransportStream.openServer(spec)) {
                transport = t;
                say(READY + " " + t.localAddress());
                stop.await();
            } finally {
                transport = null;
            }
        }
        control.interrupt();
    }

    /** Reads the parent's lines: answers counters, passes peer addresses on, stops at the end. */
    private static void control(LinkedBlockingQueue<String> peers, CountDownLatch stop) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                if (line.equals(COUNTERS)) {
                    Transport t = transport;
                    SideCounters c = t != null ? SideCounters.of(t.counters())
                            : new SideCounters(0, 0, 0, 0, 0, RawStream.published);
                    say(COUNTERS + " " + c.line());
                } else if (line.startsWith(PEER + " ")) {
                    peers.add(line.substring(PEER.length() + 1).trim());
                } else if (line.equals("EXIT")) {
                    break;
                }
            }
        } catch (IOException e) {
            // the parent is gone: stop
        } finally {
            stop.countDown();
        }
    }
}
