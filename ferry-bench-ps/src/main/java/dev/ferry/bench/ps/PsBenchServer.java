package dev.ferry.bench.ps;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.SlotTable;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcServer;
import dev.ferry.transport.TransportConfig;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;

/**
 * One parameter-server process of a benchmark (a child of the driver): a {@link ParameterServer}
 * with one table, its share of the id space created up front, served by Ferry's
 * {@link PsServer} (the parameter server's own RPC service) or by {@link GrpcPsService}. Both run
 * their handlers on {@code threads} threads.
 *
 * <p>Protocol on its standard streams: it prints {@code READY <address>} once serving; then
 * {@code RESET} starts new queue peaks, {@code STATS} prints {@code STATS key=value ...}, and end
 * of input stops it. Errors print {@code ERROR <message>} and exit 1.
 */
public final class PsBenchServer {

    /** The benchmark's table. */
    static final String TABLE = "embeddings";

    private PsBenchServer() {
    }

    /**
     * Arguments {@code key=value}: transport, dimension, ids, index, servers, optimizer
     * ({@code sgd} or {@code adagrad}), flowControl, threads, psTuning (the parameter server's
     * transport settings), inlinePulls (pulls on the transport's thread).
     */
    public static void main(String[] argv) throws Exception {
        try {
            run(Args.parse(argv));
            System.exit(0);
        } catch (Throwable t) {
            System.out.println("ERROR " + t.toString().replace('\n', ' '));
            System.out.flush();
            t.printStackTrace();
            System.exit(1);
        }
    }

    private static void run(Args args) throws IOException, InterruptedException {
        BenchTransport transport = BenchTransport.parse(args.string("transport"));
        int dimension = args.integer("dimension");
        long idSpace = args.longValue("ids");
        int index = args.integer("index");
        int servers = args.integer("servers");
        int threads = args.integer("threads");
        int replicas = args.has("replicas") ? args.integer("replicas") : 0;
        QueueGauge gauge = new QueueGauge();
        try (ParameterServer ps = create(dimension, args.string("optimizer"), idSpace, index, servers, replicas)) {
            AutoCloseable serving;
            String address;
            RpcServer rpc = null;
            if (transport.ferry()) {
                PsServer server = replicas > 0
                        ? PsServer.openMember(ps, MemberLayout.member(index), null, BenchTransport.rpc(threads),
                                args.bool("inlinePulls"))
                        : PsServer.open(ps, index, servers, null, BenchTransport.rpc(threads), args.bool("inlinePulls"));
                rpc = server.rpcServer();
                TransportConfig config = transport.config(args.bool("flowControl"), bindHost(args, index),
                        args.bool("psTuning"));
                if (args.has("pullBudget")) {
                    config = config.withPullBudgetBytes(args.longValue("pullBudget"));
                }
                address = server.listen(config, gauge.ferryOpener());
                serving = server;
            } else {
                AtomicInteger n = new AtomicInteger();
                ExecutorService pool = Executors.newFixedThreadPool(threads,
                        r -> Thread.ofPlatform().daemon().name("grpc-handler-" + n.incrementAndGet()).unstarted(r));
                Server server = NettyServerBuilder.forAddress(new InetSocketAddress(grpcHost(args), 0))
                        .addService(new GrpcPsService(ps))
                        .executor(pool)
                        .addStreamTracerFactory(GrpcPsService.counting(gauge))
                        .maxInboundMessageSize(GrpcPsClient.MAX_MESSAGE_BYTES)
                        .build()
                        .start();
                address = grpcHost(args) + ":" + server.getPort();
                serving = () -> {
                    server.shutdown();
                    server.awaitTermination(5, java.util.concurrent.TimeUnit.SECONDS);
                    server.shutdownNow();
                    pool.shutdownNow();
                };
            }
            PsServer bound = serving instanceof PsServer s ? s : null;
            BenchMetrics.Endpoint metrics = BenchMetrics.serve(args.integer("metricsPort"),
                    m -> {
                        if (bound != null) {
                            m.bind(bound);
                        } else {
                            m.bind(ps);
                        }
                    });
            System.out.println("READY " + address);
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            if (replicas > 0) {
                MemberLayout.install(bound, in.readLine(), replicas);
                System.out.println("INSTALLED");
                System.out.flush();
            }
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                switch (line.trim()) {
                    case "RESET" -> gauge.resetPeaks();
                    case "STATS" -> {
                        Map<String, Long> stats = new LinkedHashMap<>();
                        stats.put("server_peak_queue_depth", gauge.peakRequests());
                        stats.put("server_peak_queue_bytes", gauge.peakBytes());
                        if (rpc != null) {
                            Counters.put(stats, "server_", rpc.transports().getFirst().counters());
                        }
                        StringBuilder s = new StringBuilder("STATS");
                        stats.forEach((k, v) -> s.append(' ').append(k).append('=').append(v));
                        System.out.println(s);
                        System.out.flush();
                    }
                    default -> { }
                }
            }
            try {
                metrics.close();
                serving.close();
            } catch (Exception e) {
                // exiting anyway
            }
        }
    }

    /** The host Ferry's transport binds to: {@code bindHost} if given (a netlab address), else this server's loopback one. */
    private static String bindHost(Args args, int index) {
        return args.has("bindHost") ? args.string("bindHost") : BenchTransport.loopback(index);
    }

    private static String grpcHost(Args args) {
        return args.has("bindHost") ? args.string("bindHost") : "127.0.0.1";
    }

    /**
     * Server {@code index} of {@code servers}: the benchmark's table with {@code optimizer}
     * ({@code sgd} or {@code adagrad}), every row of its share of [0, idSpace) created.
     */
    static ParameterServer create(int dimension, String optimizer, long idSpace, int index, int servers) {
        return create(dimension, optimizer, idSpace, index, servers, 0);
    }

    /**
     * {@link #create(int, String, long, int, int)} for a cluster member with {@code replicas}
     * copies of every group ({@link MemberLayout}; 0: a fixed cluster's server): the rows of the
     * groups it owns or backs up are created.
     */
    static ParameterServer create(int dimension, String optimizer, long idSpace, int index, int servers,
            int replicas) {
        Optimizer o = optimizer.equals("sgd") ? Optimizer.sgd(0.01) : Optimizer.adagrad(0.01);
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        try {
            ps.createTable(table(dimension, o, idSpace, Math.max(1, servers / Math.max(1, replicas))));
            if (replicas == 0) {
                prefill(ps, dimension, idSpace, index, servers);
            } else {
                prefill(ps, dimension, idSpace, id -> MemberLayout.holds(id, index, servers, replicas));
            }
            return ps;
        } catch (RuntimeException e) {
            ps.close();
            throw e;
        }
    }

    static TableConfig table(int dimension, Optimizer optimizer, long idSpace, int servers) {
        long rows = Math.max(1 << 16, idSpace / servers * 2 + 1024);
        return TableConfig.of(TABLE, dimension, optimizer)
                .withInitializer(Initializer.uniform(-0.05, 0.05, 8))
                .withMaxRows(Math.min(Integer.MAX_VALUE, rows));
    }

    /** Creates the rows of every id in [0, idSpace) this server owns, so that no run pays for creating them. */
    static void prefill(ParameterServer ps, int dimension, long idSpace, int index, int servers) {
        SlotTable slots = SlotTable.balanced(servers);
        prefill(ps, dimension, idSpace, id -> slots.serverOf(id) == index);
    }

    /** Creates the rows of every id in [0, idSpace) that {@code mine} accepts. */
    static void prefill(ParameterServer ps, int dimension, long idSpace, java.util.function.LongPredicate mine) {
        int batch = 16_384;
        long[] ids = new long[batch];
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate((long) batch * dimension * Float.BYTES);
            int n = 0;
            for (long id = 0; id < idSpace; id++) {
                if (!mine.test(id)) {
                    continue;
                }
                ids[n++] = id;
                if (n == batch) {
                    ps.pull(TABLE, dimension, ids, 0, n, out);
                    n = 0;
                }
            }
            if (n > 0) {
                ps.pull(TABLE, dimension, ids, 0, n, out);
            }
        }
    }
}
