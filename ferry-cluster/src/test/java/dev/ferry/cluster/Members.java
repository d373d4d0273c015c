package dev.ferry.cluster;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.net.PsServer;
import dev.ferry.rpc.RpcConfig;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.TransportConfig;

/** In-process member servers of one cluster for tests, closed in reverse order. */
final class Members implements AutoCloseable {

    /**
     * This JVM's RPC secret: two suites running on one host reuse each other's freed ports, and a
     * client still routed to a closed member of one would otherwise reach a member of the other.
     */
    static final String SECRET = "ferry-cluster-test-" + java.util.UUID.randomUUID();

    /** One member: its tables, its server, its membership. */
    record Member(String id, ParameterServer ps, PsServer server, String address, ClusterMember membership) {
        void close() {
            membership.close();
            server.close();
            ps.close();
        }
    }

    private final ClusterConfig config;
    private final String provider;
    private final List<Member> members = new ArrayList<>();

    Members(ClusterConfig config, String provider) {
        this.config = config;
        this.provider = provider;
    }

    static RpcConfig rpc() {
        return RpcConfig.defaults().withSecret(SharedSecret.of(SECRET)).withHandlerThreads(4);
    }

    static TransportConfig transport(String provider) {
        return TransportConfig.defaults(provider).withPools(16L << 20, 16L << 20, 32L << 20)
                .withConnectTimeoutMillis(5_000);
    }

    /** Starts member {@code id} and joins it. */
    Member start(String id) {
        return start(id, null);
    }

    /** {@link #start(String)}, checkpointing into {@code checkpointRoot/<id>} (null: none), the cluster's root. */
    Member start(String id, java.nio.file.Path checkpointRoot) {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, id, checkpointRoot == null ? null : checkpointRoot.resolve(id), rpc(),
                false);
        String address = server.listen(transport(provider));
        MemberInfo info = new MemberInfo(id, System.nanoTime(), "localhost", Map.of(provider, address), 1 << 20);
        ClusterMember membership = ClusterMember.join(config, info, server, checkpointRoot);
        Member m = new Member(id, ps, server, address, membership);
        members.add(m);
        return m;
    }

    /** Closes one member (a clean leave once drained). */
    void stop(Member m) {
        members.remove(m);
        m.close();
    }

    List<Member> all() {
        return members;
    }

    /** Waits until the newest assignment any member installed spreads the groups evenly over {@code ids}, with no move. */
    void awaitBalanced(List<String> ids) {
        await(() -> {
            Assignment a = newest();
            if (a == null || a.move() != null) {
                return false;
            }
            int lo = dev.ferry.ps.net.RoutingTable.GROUPS / ids.size();
            for (String id : ids) {
                int n = a.groupCount(id);
                if (n < lo || n > lo + 1) {
                    return false;
                }
            }
            // Every member has installed it.
            return members.stream().allMatch(m -> m.server().routingTable() != null
                    && m.server().routingTable().generation() == a.generation());
        }, "a balanced assignment over " + ids);
    }

    Assignment newest() {
        Assignment best = null;
        for (Member m : members) {
            Assignment a = m.membership().assignment();
            if (a != null && (best == null || a.generation() > best.generation())) {
                best = a;
            }
        }
        return best;
    }

    /**
     * Member {@code id} of {@code cluster} as a child JVM ({@code ClusterServerMain} on tcp, with
     * this test run's secret and heap {@code heap}), {@code extra} arguments after its own; added
     * to {@code children}, which the test closes.
     */
    static dev.ferry.ps.net.ChildJvm startProcess(ClusterConfig cluster, String id, String heap, List<String> extra,
            List<dev.ferry.ps.net.ChildJvm> children) {
        ClusterServerMain.Options o = new ClusterServerMain.Options(cluster, id, 0, "127.0.0.1", "tcp", null, true,
                false);
        List<String> args = new ArrayList<>(o.toArgs());
        args.addAll(extra);
        ProcessBuilder builder = new ProcessBuilder(dev.ferry.ps.net.ChildJvm.javaCommand(List.of(heap,
                "-XX:+UseSerialGC"), ClusterServerMain.class.getName(), args));
        builder.environment().remove(SharedSecret.ENV_SECRET_FILE);
        builder.environment().put(SharedSecret.ENV_SECRET, SECRET);
        dev.ferry.ps.net.ChildJvm child = dev.ferry.ps.net.ChildJvm.start(builder, id);
        children.add(child);
        return child;
    }

    static void await(BooleanSupplier condition, String what) {
        await(condition, what, 30);
    }

    /** {@link #await} with a minute to wait (a restarted child JVM under load). */
    static void await60(BooleanSupplier condition, String what) {
        await(condition, what, 60);
    }

    private static void await(BooleanSupplier condition, String what, int seconds) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        }
    }

    @Override
    public void close() {
        for (int i = members.size() - 1; i >= 0; i--) {
            members.get(i).close();
        }
        members.clear();
    }
}
