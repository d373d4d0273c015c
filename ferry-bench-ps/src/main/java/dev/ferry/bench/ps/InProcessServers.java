package dev.ferry.bench.ps;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcServer;
import dev.ferry.transport.TransportConfig;

/**
 * The servers of an in-process run ({@code direct}, {@code local}), built inside the client's
 * JVM exactly as {@link PsBenchServer} builds each server process: a {@link ParameterServer}
 * with the benchmark's table, its share of the ids created up front; for {@code local} also its
 * {@link PsServer} listening on the in-JVM transport.
 */
final class InProcessServers implements AutoCloseable {

    private final List<ParameterServer> parameterServers = new ArrayList<>();
    private final List<PsServer> psServers = new ArrayList<>();
    private final List<RpcServer> rpcServers = new ArrayList<>();
    private final List<String> addresses = new ArrayList<>();
    private final QueueGauge gauge = new QueueGauge();

    /**
     * Starts {@code servers} servers (args: dimension, ids, optimizer, serverThreads, inlinePulls,
     * flowControl, psTuning); with {@code rpc} each also serves on a {@code local} transport.
     */
    static InProcessServers start(Args args, int servers, boolean rpc) {
        InProcessServers s = new InProcessServers();
        try {
            for (int i = 0; i < servers; i++) {
                ParameterServer ps = PsBenchServer.create(args.integer("dimension"), args.string("optimizer"),
                        args.longValue("ids"), i, servers);
                s.parameterServers.add(ps);
                if (rpc) {
                    PsServer server = PsServer.open(ps, i, servers, null,
                            BenchTransport.rpc(args.integer("serverThreads")), args.bool("inlinePulls"));
                    s.psServers.add(server);
                    TransportConfig config = BenchTransport.LOCAL.config(args.bool("flowControl"), "127.0.0.1",
                            args.bool("psTuning"));
                    s.addresses.add(server.rpcServer().listen(config, s.gauge.ferryOpener()));
                    s.rpcServers.add(server.rpcServer());
                }
            }
            return s;
        } catch (RuntimeException e) {
            s.close();
            throw e;
        }
    }

    List<ParameterServer> parameterServers() {
        return parameterServers;
    }

    List<String> addresses() {
        return addresses;
    }

    /** The servers' counters, as the server processes report them in {@code STATS}. */
    Map<String, Long> counters() {
        Map<String, Long> stats = new LinkedHashMap<>();
        if (rpcServers.isEmpty()) {
            return stats;
        }
        stats.put("server_peak_queue_depth", gauge.peakRequests());
        stats.put("server_peak_queue_bytes", gauge.peakBytes());
        Map<String, Long> sum = new LinkedHashMap<>();
        for (RpcServer rpc : rpcServers) {
            Map<String, Long> one = new LinkedHashMap<>();
            Counters.put(one, "server_", rpc.transports().getFirst().counters());
            one.forEach((k, v) -> sum.merge(k, v, Long::sum));
        }
        stats.putAll(sum);
        return stats;
    }

    /** New queue peaks from now on (the measured interval). */
    void resetPeaks() {
        gauge.resetPeaks();
    }

    @Override
    public void close() {
        for (PsServer server : psServers) {
            try {
                server.close();
            } catch (RuntimeException e) {
                // closing anyway
            }
        }
        for (ParameterServer ps : parameterServers) {
            ps.close();
        }
    }
}
