package dev.ferry.bench.ps;

import java.util.List;
import java.util.Locale;

import dev.ferry.ps.net.PsTransport;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.TransportConfig;

/**
 * The transports a benchmark compares: Ferry's RPC over the libfabric providers {@code shm}
 * (same-host shared memory, kernel bypass) and {@code tcp}, over {@code netty} (Ferry's
 * kernel-TCP transport, the baseline of the ratios), and gRPC-java ({@code grpc}); and two
 * in one process: {@code direct}, the floor (each client thread calls the servers'
 * {@link dev.ferry.ps.ParameterServer}s itself: plan, gather or apply, scatter; no RPC, no
 * transport), and {@code local}, the whole PsClient, RPC and PsServer path over the in-JVM
 * transport.
 */
enum BenchTransport {
    DIRECT, LOCAL, SHM, TCP, NETTY, GRPC;

    /** Every transport, in the order of a default run. */
    static final List<BenchTransport> ALL = List.of(DIRECT, LOCAL, SHM, TCP, NETTY, GRPC);

    /** The floor that every row's layer cost is measured above. */
    static final String FLOOR = "direct";

    /** The send windows and credits with flow control off: large enough never to bind here. */
    static final long HUGE_WINDOW = 1L << 32;
    static final int HUGE_CREDITS = 1024;

    String label() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** Whether Ferry's RPC (PsClient, PsServer) carries the calls. */
    boolean ferry() {
        return this != GRPC && this != DIRECT;
    }

    /** Whether servers and clients share one process (no server processes). */
    boolean inProcess() {
        return this == DIRECT || this == LOCAL;
    }

    static BenchTransport parse(String name) {
        try {
            return valueOf(name.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown transport '" + name
                    + "': direct, local, shm, tcp, netty or grpc");
        }
    }

    static List<BenchTransport> parseList(String names) {
        return java.util.Arrays.stream(names.split(",")).filter(s -> !s.isBlank()).map(BenchTransport::parse).toList();
    }

    /**
     * The transport configuration of a Ferry transport: {@link TransportConfig#defaults}, with
     * {@code psTuning} the parameter server's settings ({@link PsTransport#tune}: pull responses
     * of up to 256 KiB go eagerly), and larger pools. With {@code flowControl} off, every send
     * window and the receive credits per link are raised until they never bind (through
     * {@link TransportConfig#withFlowControl}), for the with/without comparison of the push
     * benchmark; the eager threshold stays, so large messages still go by rendezvous, and the
     * credits are capped so that a link's receive buffers stay within 64 MiB.
     */
    TransportConfig config(boolean flowControl, String bindHost, boolean psTuning) {
        if (!ferry()) {
            throw new IllegalStateException(label() + " has no Ferry transport configuration");
        }
        TransportConfig d = TransportConfig.defaults(this == TCP ? TCP_PROVIDER : label());
        if (psTuning) {
            d = PsTransport.tune(d);
        }
        TransportConfig config = new TransportConfig(d.provider(), bindHost, d.bindPort(), d.linksPerPeer(), d.maxLinks(),
                d.eagerThreshold(), d.receiveBuffersPerLink(), d.sendWindowBytesPerLink(), d.sendWindowBytesPerPeer(),
                d.sendWindowBytesPerProcess(), d.sendPoolBytes(), d.receivePoolBytes(), d.rendezvousPoolBytes(),
                d.rendezvousChunkBytes(), d.maxMessageSize(), d.connectTimeoutMillis())
                .withPools(128L << 20, 64L << 20, 256L << 20).withIdlePollMicros(d.idlePollMicros())
                .withSharedSendBytes(sameHost() ? d.sharedSendBytes() : 0);
        if (!flowControl) {
            int credits = (int) Math.min(HUGE_CREDITS, (64L << 20) / (config.eagerThreshold() + 64L));
            config = config.withFlowControl(config.eagerThreshold(), credits, HUGE_WINDOW, 2 * HUGE_WINDOW,
                    4 * HUGE_WINDOW).withPools(128L << 20, 512L << 20, 256L << 20);
        }
        return config;
    }

    /**
     * Whether this transport's processes are on one host by nature (shm), so that messages may go
     * by reference ({@link TransportConfig#sharedSendBytes}). The other rows stand for a network
     * between hosts (and netlab's hosts share this machine): they go through their provider.
     * {@code -Dferry.bench.sharedSends=false} (in every process) sends through the provider on shm too.
     */
    boolean sameHost() {
        return "shm".equals(label()) && SHARED_SENDS;
    }

    /**
     * The libfabric provider of the {@code tcp} row: {@code tcp}, or with
     * {@code -Dferry.bench.tcpProvider=net} (in every process) libfabric 1.17's {@code net}, the
     * rewritten TCP provider that later releases ship as {@code tcp}, for comparison.
     */
    private static final String TCP_PROVIDER = System.getProperty("ferry.bench.tcpProvider", "tcp");

    /** {@code -Dferry.bench.sharedSends=false} sends through the provider on shm too, for comparison. */
    private static final boolean SHARED_SENDS = Boolean.parseBoolean(System.getProperty("ferry.bench.sharedSends", "true"));

    /**
     * The loopback address process {@code n} of a run binds to. libfabric's shm provider names its
     * region after the bind host and numbers regions per process, so two processes on one
     * address collide; every process of a run gets its own (as the PS's LocalCluster does).
     */
    static String loopback(int n) {
        return "127.0.0." + (10 + n);
    }

    /** The RPC settings of both sides: no authentication (one host), {@code handlerThreads} on the server. */
    static RpcConfig rpc(int handlerThreads) {
        return RpcConfig.defaults().withoutAuthentication().withHandlerThreads(handlerThreads)
                .withDefaultDeadlineMillis(30_000);
    }
}
