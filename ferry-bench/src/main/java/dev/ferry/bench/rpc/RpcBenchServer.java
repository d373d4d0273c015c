package dev.ferry.bench.rpc;

import dev.ferry.bench.pingpong.ControlLine;
import dev.ferry.bench.pingpong.PingPong;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcServer;
import dev.ferry.transport.SharedSecret;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The server of the RPC benchmark, run as a child process by {@link RpcBenchmark}: serves one
 * echo method and speaks {@link ControlLine}s on its standard streams.
 *
 * <pre>
 *   client -&gt; server   SECRET &lt;base64&gt;     the shared secret of this run (never on the command line)
 *   server -&gt; client   ADDRESS &lt;host:port&gt;  listening: the client may connect
 *   client -&gt; server   DONE                 the client is finished: close and exit
 *   server -&gt; client   ERROR &lt;message&gt;      the server failed; it exits with status 1
 * </pre>
 *
 * The end of its input (the client is gone) ends it too.
 */
public final class RpcBenchServer {

    /** The echo: answers {@code size} bytes whose first eight are those of the request. */
    static final RpcMethod ECHO = RpcMethod.idempotent(1).inline();
    /** The keyword of the secret line. */
    static final String SECRET = "SECRET";

    private RpcBenchServer() {
    }

    /** The arguments that tell a server child what {@code spec} asks, as {@link #main} expects them. */
    static List<String> arguments(RpcBenchSpec spec) {
        return List.of(spec.provider(), Integer.toString(spec.size()), Integer.toString(spec.concurrency()));
    }

    /** {@code provider size concurrency}; exits 0 when the client is done, 1 on failure. */
    public static void main(String[] args) {
        int status;
        try {
            RpcBenchSpec spec = new RpcBenchSpec(args[0], Integer.parseInt(args[1]), Integer.parseInt(args[2]), 0, 0,
                    1, 10_000);
            status = serve(spec, System.in, System.out);
        } catch (RuntimeException e) {
            System.out.println(ControlLine.ERROR + " " + ControlLine.oneLine(PingPong.message(e)));
            status = 1;
        }
        System.out.flush();
        System.exit(status);
    }

    static int serve(RpcBenchSpec spec, InputStream input, PrintStream out) {
        BufferedReader in = new BufferedReader(new InputStreamReader(input, StandardCharsets.UTF_8));
        try {
            String line = in.readLine();
            if (line == null || !ControlLine.is(line, SECRET)) {
                throw new IllegalStateException("the client sent no secret");
            }
            RpcConfig config = RpcConfig.defaults().withSecret(SharedSecret.of(ControlLine.bytes(line)));
            try (RpcServer server = RpcServer.open(config)) {
                int size = spec.size();
                server.register(ECHO, call -> {
                    MemorySegment request = call.request();
                    MemorySegment reply = call.reply(size);
                    MemorySegment.copy(request, 0, reply, 0, Math.min(8, Math.min(request.byteSize(), size)));
                });
                String address = server.listen(spec.transportConfig());
                out.println(ControlLine.ADDRESS + " " + address);
                out.flush();
                for (line = in.readLine(); line != null && !ControlLine.is(line, ControlLine.DONE); line = in.readLine()) {
                    // nothing else is said
                }
            }
            return 0;
        } catch (IOException | RuntimeException e) {
            out.println(ControlLine.ERROR + " " + ControlLine.oneLine(PingPong.message(e)));
            out.flush();
            return 1;
        }
    }
}
