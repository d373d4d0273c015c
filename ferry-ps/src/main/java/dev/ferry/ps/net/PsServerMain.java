package dev.ferry.ps.net;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * One parameter-server process: opens the tables (empty, restored from the newest checkpoint,
 * or read-only for serving), listens, prints {@code LISTENING <address>} on standard output, and
 * serves until SIGTERM (or, for a child of {@link LocalCluster}, until its standard input
 * closes, so that it cannot outlive its parent). {@code bin/ferry server} runs the same code.
 *
 * <pre>
 * PsServerMain [--port p] [--bind-host h] [--transport shm|tcp|netty] [--checkpoint-dir d]
 *              [--serving] [--index i --servers n] [--exit-on-stdin-eof] [--no-auth]
 * </pre>
 * <p>{@code --bind-host} (default 127.0.0.1) is where the transport listens. On {@code shm} it
 * also names the shared-memory region, and libfabric's shm provider numbers regions per process,
 * so two processes on one host must listen on different loopback addresses (127.0.0.2, ...);
 * {@link LocalCluster} gives each child its own.
 * The RPC secret comes from {@code FERRY_RPC_SECRET} or {@code FERRY_RPC_SECRET_FILE} unless
 * {@code --no-auth} (a demo on one host only).
 */
public final class PsServerMain {

    /** The line a server prints once it listens, followed by its address. */
    public static final String LISTENING = "LISTENING";

    private PsServerMain() {
    }

    /**
     * What to run.
     *
     * @param port           the transport's bootstrap (or TCP) port; 0 picks a free one
     * @param bindHost       the address it listens on (and on shm, the name of its region)
     * @param transport      {@code shm}, {@code tcp}, {@code netty} or another libfabric provider
     * @param checkpointDir  restore from and checkpoint into this directory; null for none
     * @param serving        read-only from the newest checkpoint in {@code checkpointDir}
     * @param index          this server's index in the cluster
     * @param servers        servers in the cluster
     * @param exitOnStdinEof exit when standard input closes (a child process)
     * @param noAuth         no RPC authentication
     */
    public record Options(int port, String bindHost, String transport, Path checkpointDir, boolean serving, int index, int servers,
            boolean exitOnStdinEof, boolean noAuth) {

        /** Checks the values. */
        public Options {
            if (port < 0 || port > 65535) {
                throw new IllegalArgumentException("--port must be in [0, 65535]: " + port);
            }
            if (bindHost == null || bindHost.isBlank()) {
                throw new IllegalArgumentException("--bind-host is empty");
            }
            if (transport == null || transport.isBlank()) {
                throw new IllegalArgumentException("--transport is empty");
            }
            if (servers < 1 || index < 0 || index >= servers) {
                throw new IllegalArgumentException("--index " + index + " must be in [0, --servers " + servers + ")");
            }
            if (serving && checkpointDir == null) {
                throw new IllegalArgumentException("--serving needs --checkpoint-dir");
            }
        }

        /** The command-line arguments that give these options. */
        public java.util.List<String> toArgs() {
            java.util.List<String> args = new java.util.ArrayList<>(java.util.List.of("--port", Integer.toString(port),
                    "--bind-host", bindHost,
                    "--transport", transport, "--index", Integer.toString(index), "--servers", Integer.toString(servers)));
            if (checkpointDir != null) {
                args.add("--checkpoint-dir");
                args.add(checkpointDir.toString());
            }
            if (serving) {
                args.add("--serving");
            }
            if (exitOnStdinEof) {
                args.add("--exit-on-stdin-eof");
            }
            if (noAuth) {
                args.add("--no-auth");
            }
            return args;
        }

        /** Parses the arguments of {@link PsServerMain}. */
        public static Options parse(String[] args) {
            int port = 0;
            String bindHost = "127.0.0.1";
            String transport = "shm";
            Path dir = null;
            boolean serving = false;
            int index = 0;
            int servers = 1;
            boolean eof = false;
            boolean noAuth = false;
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                switch (a) {
                    case "--port" -> port = Integer.parseInt(value(args, ++i, a));
                    case "--bind-host" -> bindHost = value(args, ++i, a);
                    case "--transport" -> transport = value(args, ++i, a);
                    case "--checkpoint-dir" -> dir = Path.of(value(args, ++i, a));
                    case "--serving" -> serving = true;
                    case "--index" -> index = Integer.parseInt(value(args, ++i, a));
                    case "--servers" -> servers = Integer.parseInt(value(args, ++i, a));
                    case "--exit-on-stdin-eof" -> eof = true;
                    case "--no-auth" -> noAuth = true;
                    default -> throw new IllegalArgumentException("unknown option " + a);
                }
            }
            return new Options(port, bindHost, transport, dir, serving, index, servers, eof, noAuth);
        }

        private static String value(String[] args, int i, String option) {
            if (i >= args.length) {
                throw new IllegalArgumentException(option + " needs a value");
            }
            return args[i];
        }
    }

    public static void main(String[] args) {
        PsServerMain.run(args, Options::parse, options -> serve(options, System.out, System.err));
    }

    /**
     * A server process's {@code main}: parses {@code args} (status 2 and the reason on standard
     * error if they are bad), then exits with what {@code serve} returns.
     */
    public static <O> void run(String[] args, java.util.function.Function<String[], O> parse,
            java.util.function.ToIntFunction<O> serve) {
        O options;
        try {
            options = parse.apply(args);
        } catch (IllegalArgumentException e) {
            System.err.println("ferry server: " + e.getMessage());
            System.exit(2);
            return;
        }
        System.exit(serve.applyAsInt(options));
    }

    /** Exits the process when standard input closes: the launcher that holds the pipe is gone or done. */
    public static void exitOnStdinEof() {
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // the parent holds the pipe open while it wants this server
                }
            } catch (IOException e) {
                // parent gone
            }
            System.exit(0);
        }, "ferry-server-stdin");
        watcher.setDaemon(true);
        watcher.start();
    }

    /** Waits until {@code stopped} counts down (the shutdown hook ran). */
    public static void await(CountDownLatch stopped) {
        try {
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Runs a server until SIGTERM (or standard input closes, with {@code exitOnStdinEof}); returns
     * the exit status, 1 if it could not start.
     */
    public static int serve(Options options, PrintStream out, PrintStream err) {
        return serve(options, out, err, new Listener() {
        });
    }

    /** Told how a server started and stops: metrics and health checks hang on it. */
    public interface Listener {

        /** The tables are open (restored, if there was a checkpoint) and the server made; not listening yet. */
        default void opened(PsServer server) {
        }

        /** The server listens at {@code address}: it serves. */
        default void listening(PsServer server, String address) {
        }

        /** The server is about to close (SIGTERM). */
        default void stopping() {
        }

        /** The server answers the live export's followers with {@code service}. */
        default void exporting(ExportService service) {
        }

        /** The server follows a training cluster with {@code follower}. */
        default void following(DeltaFollower follower) {
        }
    }

    /** {@link #serve(Options, PrintStream, PrintStream)}, telling {@code listener} of each step. */
    public static int serve(Options options, PrintStream out, PrintStream err, Listener listener) {
        PsServer server;
        ParameterServer ps;
        try {
            PsConfig config = PsConfig.defaults();
            ps = options.serving() ? ParameterServer.serving(config, options.checkpointDir())
                    : options.checkpointDir() != null ? ParameterServer.open(config, options.checkpointDir())
                    : ParameterServer.create(config);
            RpcConfig rpc = RpcConfig.defaults().withHandlerThreads(Math.max(4, Runtime.getRuntime().availableProcessors()));
            if (options.noAuth()) {
                rpc = rpc.withoutAuthentication();
            }
            try {
                server = PsServer.open(ps, options.index(), options.servers(), options.checkpointDir(), rpc);
            } catch (RuntimeException e) {
                ps.close();
                throw e;
            }
        } catch (RuntimeException e) {
            err.println("ferry server: " + e.getMessage());
            return 1;
        }
        listener.opened(server);
        if (!options.serving()) {
            listener.exporting(ExportService.attach(server)); // followers may poll it (ferry://)
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            listener.stopping();
            server.close();
            err.println("ferry server: stopped");
            err.flush();
            stopped.countDown();
        }, "ferry-server-stop");
        Runtime.getRuntime().addShutdownHook(hook);
        String address;
        try {
            address = server.listen(TransportConfig.defaults(options.transport()).withBindHost(options.bindHost())
                    .withBindPort(options.port()));
        } catch (RuntimeException e) {
            err.println("ferry server: cannot listen on " + options.transport() + " port " + options.port() + ": "
                    + e.getMessage());
            return 1;
        }
        err.printf(Locale.ROOT, "ferry server: server %d of %d on %s%s, %d tables%s%n", options.index(),
                options.servers(), options.transport(), options.serving() ? " (serving, read-only)" : "",
                ps.stats().size(), ps.restoredFrom().map(p -> ", restored from " + p).orElse(""));
        listener.listening(server, address);
        out.println(LISTENING + " " + address);
        out.flush();
        if (options.exitOnStdinEof()) {
            PsServerMain.exitOnStdinEof();
        }
        PsServerMain.await(stopped);
        return 0;
    }
}
