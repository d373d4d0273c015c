package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.stream.Stream;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.TableConfig;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.rpc.RemoteException;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.function.Executable;

/** In-process clusters (servers and a client in this JVM) that a test closes at its end, checking no buffer was left held. */
abstract class PsNetTestBase {

    static final String SECRET = "ferry-ps-test-secret-0123456789";

    private final List<AutoCloseable> opened = new CopyOnWriteArrayList<>();
    private final List<Transport> watched = new CopyOnWriteArrayList<>();

    /** The providers every test runs on: {@code -Dferry.ps.providers} or shm, tcp, netty and local (in-JVM). */
    static Stream<String> providers() {
        return Arrays.stream(System.getProperty("ferry.ps.providers", "shm,tcp,netty,local").split(","));
    }

    /** A transport small enough that several can be open at once. */
    static TransportConfig transport(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 32L << 20)
                .withConnectTimeoutMillis(5_000);
    }

    /** The transport of this test's servers and clients; {@link #transport(String)} unless a test says otherwise. */
    TransportConfig config(String provider) {
        return transport(provider);
    }

    static RpcConfig rpc() {
        return RpcConfig.defaults().withSecret(SharedSecret.of(SECRET)).withHandlerThreads(4);
    }

    /** A cluster of servers in this JVM and a client of it. */
    record Cluster(List<ParameterServer> servers, List<PsServer> rpcServers, List<String> addresses, PsClient client) {
    }

    /** {@code n} servers on {@code provider}; server {@code i} checkpoints into {@code checkpoints/server-i} if given. */
    Cluster cluster(String provider, int n, PsConfig config, Path checkpoints) {
        List<ParameterServer> servers = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            servers.add(ParameterServer.create(config));
        }
        return serve(provider, servers, checkpoints);
    }

    /** Serves existing parameter servers, server {@code i} being {@code servers.get(i)}. */
    Cluster serve(String provider, List<ParameterServer> servers, Path checkpoints) {
        return serve(provider, servers, checkpoints, false);
    }

    /** {@link #serve(String, List, Path)}, with pulls served on the transport's thread if {@code inlinePulls}. */
    Cluster serve(String provider, List<ParameterServer> servers, Path checkpoints, boolean inlinePulls) {
        List<PsServer> rpcServers = new ArrayList<>();
        List<String> addresses = new ArrayList<>();
        for (int i = 0; i < servers.size(); i++) {
            ParameterServer ps = servers.get(i);
            opened.add(ps);
            PsServer server = PsServer.open(ps, i, servers.size(),
                    checkpoints == null ? null : checkpoints.resolve("server-" + i), rpc(), inlinePulls);
            opened.add(0, server);
            rpcServers.add(server);
            addresses.add(server.listen(config(provider)));
            watched.add(server.rpcServer().transports().getLast());
        }
        return new Cluster(servers, rpcServers, addresses, client(provider, addresses));
    }

    /**
     * Opens a cluster member per id on {@code provider} (no controller: the test installs the
     * tables), tracked like {@link #track}; adds each one's address, server and store to the
     * lists, and creates the table {@code t} (dimension 2, SGD with learning rate 1) in each store
     * if {@code withTable}.
     */
    void openMembers(String provider, List<String> ids, List<String> addresses, List<PsServer> servers,
            List<ParameterServer> stores, boolean withTable) {
        for (String id : ids) {
            ParameterServer ps = ParameterServer.create(PsConfig.defaults());
            PsServer server = PsServer.openMember(ps, id, null, rpc(), false);
            addresses.add(server.listen(config(provider)));
            track(ps, server);
            servers.add(server);
            if (stores != null) {
                stores.add(ps);
            }
            if (withTable) {
                ps.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
            }
        }
    }

    /** A member started by {@link #exportingMember}. */
    record Member(ParameterServer ps, PsServer server, String address) {
    }

    /**
     * Member "m" on {@code provider}, the only one of its routing table, with the export
     * attached, sparse table "t" (SGD, {@code dimension}) and dense tensor "d" ({@code length}).
     */
    Member exportingMember(String provider, int dimension, int length) {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, "m", null, rpc(), false);
        ExportService.attach(server);
        String address = server.listen(config(provider));
        track(ps, server);
        server.install(RoutingTable.of(1, List.of("m"), List.of(address), new int[RoutingTable.GROUPS]));
        ps.createTable(TableConfig.of("t", dimension, Optimizer.sgd(1)));
        ps.createDense(new DenseConfig("d", length, Optimizer.sgd(1), Initializer.zeros()));
        return new Member(ps, server, address);
    }

    /** Closes {@code ps} and {@code server} at the end of the test and checks the server's buffers. */
    void track(ParameterServer ps, PsServer server) {
        opened.add(ps);
        opened.add(0, server);
        watched.add(server.rpcServer().transports().getLast());
    }

    PsClient client(String provider, List<String> addresses) {
        PsClient client = PsClient.connect(rpc(), config(provider), addresses);
        opened.add(0, client);
        watched.add(client.rpcClient().primaryTransport());
        return client;
    }

    @AfterEach
    void closeAll() throws Exception {
        // A buffer released by the application is reposted by the transport's own thread: give a
        // loaded machine up to 2 s for that (a leaked buffer never comes back, so it still fails).
        List<Long> held = new ArrayList<>();
        long deadline = System.nanoTime() + 2_000_000_000L;
        do {
            Thread.sleep(20);
            held.clear();
            for (Transport transport : watched) {
                held.add(transport.counters().receiveBuffersHeld());
            }
        } while (held.stream().anyMatch(h -> h != 0) && System.nanoTime() < deadline);
        for (AutoCloseable closeable : opened) {
            closeable.close();
        }
        opened.clear();
        watched.clear();
        for (long h : held) {
            assertEquals(0, h, "a transport ended with received messages not released");
        }
    }

    /**
     * The parameter server's refusal that a failed call's future carries, read as the client
     * reads it from the server at {@code address}; rethrows {@code e} if it carries none.
     */
    static PsException refusal(ExecutionException e, String address) throws ExecutionException {
        if (e.getCause() instanceof RemoteException remote) {
            PsException ps = PsDescriptor.toPsException(remote, address);
            if (ps != null) {
                return ps;
            }
        }
        throw e;
    }

    /** A raw request, what it should be refused with, and a part of the reason. */
    record Case(String what, dev.ferry.rpc.RpcMethod method, byte[] body, PsException.Code code, String reason) {
    }

    /** Sends {@code k}'s body on {@code c} and returns the parameter server's refusal of it. */
    static PsException refused(dev.ferry.rpc.RpcChannel c, Case k) throws Exception {
        try {
            c.call(k.method(), k.body()).get(10, java.util.concurrent.TimeUnit.SECONDS).release();
        } catch (ExecutionException e) {
            try {
                return refusal(e, c.address());
            } catch (ExecutionException other) {
                throw new AssertionError(k.what() + ": not a parameter-server refusal", other);
            }
        }
        throw new AssertionError(k.what() + ": accepted");
    }

    /** Runs {@code call} and checks it fails with a {@link PsException} of {@code code}; returns it. */
    static PsException expect(PsException.Code code, Executable call) {
        PsException e = assertThrows(PsException.class, call);
        assertEquals(code, e.code(), e::toString);
        return e;
    }

    /** An id that server {@code server} of {@code n} owns (balanced slot table), from {@code from} on. */
    static long idOn(int server, int n, long from) {
        dev.ferry.ps.SlotTable slots = dev.ferry.ps.SlotTable.balanced(n);
        long id = from;
        while (slots.serverOf(id) != server) {
            id++;
        }
        return id;
    }
}
