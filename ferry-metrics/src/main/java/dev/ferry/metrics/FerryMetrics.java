package dev.ferry.metrics;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.ToDoubleFunction;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.SparseTable;
import dev.ferry.ps.TableStats;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcClient;
import dev.ferry.rpc.RpcClientCounters;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcObserver;
import dev.ferry.rpc.RpcServer;
import dev.ferry.rpc.RpcServerCounters;
import dev.ferry.transport.Transport;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;

/**
 * Ferry's meters on one {@link MeterRegistry}: the application passes its own registry
 * ({@link #on}), or takes a Prometheus one ({@link #prometheus}) and serves it with
 * {@link MetricsServer}.
 *
 * <pre>{@code
 * FerryMetrics metrics = FerryMetrics.prometheus();
 * metrics.bind(psServer);                       // transports, RPC server, allocator, tables
 * MetricsServer http = MetricsServer.start(metrics, "127.0.0.1", 9400, () -> true);
 * }</pre>
 *
 * <p>Names follow Prometheus's conventions once exported: {@code ferry_transport_credit_stalls_total
 * {provider="shm",role="server"}}, base units ({@code _bytes}, {@code _seconds}), {@code _total}
 * on counters. Tags are bounded: provider and role of a transport (its counters summed over the
 * process's transports of that kind), method (named by {@link MethodNames}, else {@code other})
 * and outcome of a call, pool of the allocator, name of a table; never a peer address.
 *
 * <p>Meters read the counters the layers already keep, when scraped; nothing is added to the
 * data path but the latency timers of RPC calls and handlers, which neither allocate nor lock.
 * Transports a server opens after binding, and tables created later, appear at the next
 * {@link #refresh} (which {@link MetricsServer} calls before each scrape). Thread-safe.
 */
public final class FerryMetrics {

    private final MeterRegistry registry;
    private final Map<String, TransportGroup> transports = new ConcurrentHashMap<>();
    private final List<RpcServer> servers = new CopyOnWriteArrayList<>();
    private final List<RpcClient> clients = new CopyOnWriteArrayList<>();
    private final List<ParameterServer> parameterServers = new CopyOnWriteArrayList<>();
    private final Map<String, Boolean> tables = new ConcurrentHashMap<>();
    private final Snapshot<RpcServerCounters> serverCounters = new Snapshot<>(this::sumServers, 100_000_000L);
    private final Snapshot<RpcClientCounters> clientCounters = new Snapshot<>(this::sumClients, 100_000_000L);
    private final Snapshot<Map<String, TableStats>> tableStats = new Snapshot<>(this::allTables, 100_000_000L);
    private MethodTimers clientTimers;
    private MethodTimers serverTimers;
    private MethodNames names;
    private boolean serverBound;
    private boolean clientBound;
    private boolean psBound;

    private FerryMetrics(MeterRegistry registry, MethodNames names) {
        this.registry = Objects.requireNonNull(registry, "registry");
        this.names = Objects.requireNonNull(names, "names");
    }

    /** Meters on the application's {@code registry}, methods named as the parameter server's. */
    public static FerryMetrics on(MeterRegistry registry) {
        return new FerryMetrics(registry, MethodNames.parameterServer());
    }

    /** Meters on {@code registry}, with {@code names} for the {@code method} tag. */
    public static FerryMetrics on(MeterRegistry registry, MethodNames names) {
        return new FerryMetrics(registry, names);
    }

    /** Meters on a new Prometheus registry, for {@link MetricsServer} or {@link #scrape}. */
    public static FerryMetrics prometheus() {
        return on(new PrometheusMeterRegistry(PrometheusConfig.DEFAULT));
    }

    /** The registry the meters are on. */
    public MeterRegistry registry() {
        return registry;
    }

    /** The registry's content in Prometheus's text format, after a {@link #refresh}. */
    public String scrape() {
        if (!(registry instanceof PrometheusMeterRegistry prometheus)) {
            throw new IllegalStateException("scrape needs a PrometheusMeterRegistry, this is a "
                    + registry.getClass().getSimpleName());
        }
        refresh();
        return prometheus.scrape();
    }

    /** Binds a parameter-server process: its tables, its RPC server and the transports it listens on. */
    public synchronized FerryMetrics bind(PsServer server) {
        bind(server.parameterServer());
        bind(server.rpcServer());
        return this;
    }

    /** Binds the tables of {@code ps}: rows, capacity and memory per table, and the server's mode. */
    public synchronized FerryMetrics bind(ParameterServer ps) {
        if (parameterServers.contains(ps)) {
            return this;
        }
        parameterServers.add(ps);
        if (!psBound) {
            psBound = true;
            Gauge.builder("ferry.ps.tables", tableStats, s -> s.get().size())
                    .description("Sparse tables and dense tensors served").register(registry);
            Gauge.builder("ferry.ps.read.only", parameterServers,
                    l -> l.stream().anyMatch(ParameterServer::readOnly) ? 1 : 0)
                    .description("1 if the parameter server serves a checkpoint read-only").register(registry);
        }
        refresh();
        return this;
    }

    /** Binds an RPC server: its counters, handler latency per method, and its transports. */
    public synchronized FerryMetrics bind(RpcServer server) {
        if (servers.contains(server)) {
            return this;
        }
        servers.add(server);
        if (!serverBound) {
            serverBound = true;
            serverTimers = new MethodTimers(registry, "ferry.rpc.server.handler",
                    "Time a handler ran, per method", names, true);
            scounter("ferry.rpc.server.requests", "Request frames received, retries included", c -> c.requests());
            scounter("ferry.rpc.server.executions", "Handler runs", c -> c.executions());
            scounter("ferry.rpc.server.replays", "Retries answered from a stored outcome", c -> c.replays());
            scounter("ferry.rpc.server.duplicates.while.running", "Retries that arrived while the first run went on",
                    c -> c.duplicatesWhileRunning());
            scounter("ferry.rpc.server.outcomes.lost", "Retries refused: their outcome was trimmed or evicted",
                    c -> c.outcomesLost());
            scounter("ferry.rpc.server.handler.errors", "Handler runs that threw", c -> c.handlerErrors());
            scounter("ferry.rpc.server.deadlines.missed", "Requests whose deadline passed before the handler",
                    c -> c.deadlinesMissed());
            scounter("ferry.rpc.server.refusals", "Peers refused at authentication", c -> c.refusals());
            scounter("ferry.rpc.server.sessions", "Sessions opened (authenticated)", c -> c.sessions());
            Gauge.builder("ferry.rpc.server.dedupe.entries", serverCounters, s -> s.get().dedupeEntries())
                    .description("Entries in the deduplication table").register(registry);
        }
        MethodTimers timers = serverTimers;
        server.observe(new RpcObserver() {
            @Override
            public void handled(RpcMethod method, long nanos, boolean ok) {
                timers.record(method.id(), nanos, ok);
            }
        });
        refresh();
        return this;
    }

    /** Binds an RPC client: its counters, call latency per method and outcome, fallback state, transports. */
    public synchronized FerryMetrics bind(RpcClient client) {
        if (clients.contains(client)) {
            return this;
        }
        clients.add(client);
        if (!clientBound) {
            clientBound = true;
            clientTimers = new MethodTimers(registry, "ferry.rpc.client.call",
                    "Time from a call to its outcome, per method and outcome", names, true);
            ccounter("ferry.rpc.client.calls", "Calls made", c -> c.calls());
            ccounter("ferry.rpc.client.succeeded", "Calls completed with a response", c -> c.succeeded());
            ccounter("ferry.rpc.client.remote.errors", "Calls failed by the server's handler", c -> c.remoteErrors());
            ccounter("ferry.rpc.client.timeouts", "Calls failed by their deadline", c -> c.timeouts());
            ccounter("ferry.rpc.client.unavailable", "Calls failed: no session to the server", c -> c.unavailable());
            ccounter("ferry.rpc.client.cancelled", "Calls cancelled by the caller", c -> c.cancelled());
            ccounter("ferry.rpc.client.resends", "Requests sent again on a new session", c -> c.resends());
            ccounter("ferry.rpc.client.sessions.opened", "Sessions established", c -> c.sessionsOpened());
            ccounter("ferry.rpc.client.session.failures", "Sessions lost", c -> c.sessionFailures());
            ccounter("ferry.rpc.client.connect.failures", "Connect or handshake attempts that failed",
                    c -> c.connectFailures());
            ccounter("ferry.rpc.client.fallback.sends", "Requests sent on the fallback transport",
                    c -> c.fallbackSends());
            ccounter("ferry.rpc.client.breaker.opened", "Times a server's traffic moved to the fallback",
                    c -> c.breakerOpened());
            ccounter("ferry.rpc.client.breaker.closed", "Times it moved back to the fabric", c -> c.breakerClosed());
            Gauge.builder("ferry.rpc.client.servers", clients, FerryMetrics::channels)
                    .description("Servers this process calls").register(registry);
            Gauge.builder("ferry.rpc.client.servers.on.fallback", clients, FerryMetrics::onFallback)
                    .description("Servers whose traffic is on the fallback transport now").register(registry);
            Gauge.builder("ferry.rpc.client.pending.calls", clients, FerryMetrics::pending)
                    .description("Calls not yet completed").register(registry);
        }
        MethodTimers timers = clientTimers;
        client.observe(new RpcObserver() {
            @Override
            public void callCompleted(RpcMethod method, long nanos, boolean ok) {
                timers.record(method.id(), nanos, ok);
            }
        });
        bind(client.primaryTransport(), "client");
        if (client.fallbackTransport() != null) {
            bind(client.fallbackTransport(), "client");
        }
        return this;
    }

    /**
     * Binds a transport under {@code role} ({@code server}, {@code client}, or the application's
     * word): its counters, summed with those of the process's other transports of the same
     * provider and role, and its allocator's.
     */
    public FerryMetrics bind(Transport transport, String role) {
        if (!role.matches("[a-z][a-z0-9_]*")) {
            throw new IllegalArgumentException("a role is [a-z][a-z0-9_]*: " + role);
        }
        String provider = transport.provider();
        transports.computeIfAbsent(provider + "/" + role, k -> new TransportGroup(registry, provider, role))
                .add(transport);
        return this;
    }

    /** Registers meters for what appeared since binding: a server's new transports, new tables. */
    public void refresh() {
        for (RpcServer s : servers) {
            for (Transport t : s.transports()) {
                bind(t, "server");
            }
        }
        if (!parameterServers.isEmpty()) {
            for (String table : tableStats.get().keySet()) {
                if (tables.putIfAbsent(table, Boolean.TRUE) == null) {
                    bindTable(table);
                }
            }
        }
    }

    private void bindTable(String table) {
        Tags tags = Tags.of("table", table);
        Gauge.builder("ferry.ps.table.rows", tableStats, s -> value(s.get().get(table), TableStats::rows)).tags(tags)
                .description("Rows stored").register(registry);
        Gauge.builder("ferry.ps.table.capacity.rows", tableStats, s -> value(s.get().get(table), TableStats::capacityRows))
                .tags(tags).description("The most rows the table may hold").register(registry);
        Gauge.builder("ferry.ps.table.memory", tableStats, s -> value(s.get().get(table), TableStats::reservedBytes))
                .tags(tags).baseUnit("bytes").description("Off-heap bytes the table holds: rows and index")
                .register(registry);
        Gauge.builder("ferry.ps.table.dimension", tableStats, s -> value(s.get().get(table), TableStats::dimension))
                .tags(tags).description("Weights per row").register(registry);
        FunctionCounter.builder("ferry.ps.table.admitted", this, m -> m.admission(table, SparseTable.AdmissionStats::admitted))
                .tags(tags).description("Rows created by pulls and pushes (admitted ids)").register(registry);
        FunctionCounter.builder("ferry.ps.table.rejected", this, m -> m.admission(table, SparseTable.AdmissionStats::rejected))
                .tags(tags).description("Sightings of ids not admitted: answered with initial values, not stored")
                .register(registry);
        Gauge.builder("ferry.ps.table.admission.filter", this, m -> m.admission(table, SparseTable.AdmissionStats::filterBytes))
                .tags(tags).baseUnit("bytes").description("Memory of the table's admission filter").register(registry);
        FunctionCounter.builder("ferry.ps.table.refused.full", tableStats, s -> value(s.get().get(table), TableStats::refusedFull))
                .tags(tags).description("New ids not stored because the table was at its eviction capacity").register(registry);
        FunctionCounter.builder("ferry.ps.table.evicted", tableStats, s -> value(s.get().get(table), TableStats::evictedTtl))
                .tags(tags.and("reason", "ttl")).description("Rows deleted by eviction").register(registry);
        FunctionCounter.builder("ferry.ps.table.evicted", tableStats, s -> value(s.get().get(table), TableStats::evictedCapacity))
                .tags(tags.and("reason", "capacity")).description("Rows deleted by eviction").register(registry);
    }

    /** An admission figure of a table summed over the bound servers. */
    private double admission(String table, java.util.function.ToLongFunction<SparseTable.AdmissionStats> f) {
        long sum = 0;
        for (ParameterServer ps : parameterServers) {
            try {
                sum += f.applyAsLong(ps.table(table).admissionStats());
            } catch (RuntimeException absentOrClosed) {
                // a dense tensor, a closed server, or a table another server holds
            }
        }
        return sum;
    }

    private static double value(TableStats s, java.util.function.ToLongFunction<TableStats> f) {
        return s == null ? Double.NaN : f.applyAsLong(s);
    }

    private Map<String, TableStats> allTables() {
        Map<String, TableStats> all = new java.util.TreeMap<>();
        for (ParameterServer ps : parameterServers) {
            try {
                for (TableStats t : ps.stats()) {
                    all.merge(t.name(), t, TableStats::plus);
                }
            } catch (RuntimeException e) {
                // closed: its tables are gone
            }
        }
        return all;
    }

    private void scounter(String name, String help, ToDoubleFunction<RpcServerCounters> f) {
        FunctionCounter.builder(name, serverCounters, s -> f.applyAsDouble(s.get())).description(help)
                .register(registry);
    }

    private void ccounter(String name, String help, ToDoubleFunction<RpcClientCounters> f) {
        FunctionCounter.builder(name, clientCounters, s -> f.applyAsDouble(s.get())).description(help)
                .register(registry);
    }

    private RpcServerCounters sumServers() {
        long[] v = new long[10];
        for (RpcServer s : servers) {
            RpcServerCounters c = s.counters();
            v[0] += c.requests();
            v[1] += c.executions();
            v[2] += c.replays();
            v[3] += c.duplicatesWhileRunning();
            v[4] += c.outcomesLost();
            v[5] += c.handlerErrors();
            v[6] += c.deadlinesMissed();
            v[7] += c.refusals();
            v[8] += c.sessions();
            v[9] += c.dedupeEntries();
        }
        return new RpcServerCounters(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
    }

    private RpcClientCounters sumClients() {
        long[] v = new long[13];
        for (RpcClient client : clients) {
            RpcClientCounters c = client.counters();
            long[] w = {c.calls(), c.succeeded(), c.remoteErrors(), c.timeouts(), c.unavailable(), c.cancelled(),
                c.resends(), c.sessionsOpened(), c.sessionFailures(), c.connectFailures(), c.fallbackSends(),
                c.breakerOpened(), c.breakerClosed()};
            for (int i = 0; i < v.length; i++) {
                v[i] += w[i];
            }
        }
        return new RpcClientCounters(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]);
    }

    private static double channels(List<RpcClient> clients) {
        return all(clients).size();
    }

    private static double onFallback(List<RpcClient> clients) {
        return all(clients).stream().filter(RpcChannel::onFallback).count();
    }

    private static double pending(List<RpcClient> clients) {
        return all(clients).stream().mapToInt(RpcChannel::pendingCalls).sum();
    }

    private static List<RpcChannel> all(List<RpcClient> clients) {
        List<RpcChannel> all = new ArrayList<>();
        for (RpcClient c : clients) {
            all.addAll(c.channels());
        }
        return all;
    }
}
