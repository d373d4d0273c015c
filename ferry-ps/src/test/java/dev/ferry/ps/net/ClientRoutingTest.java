package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;

/**
 * A client that follows a routing table with generations: member servers that own what their
 * table says, {@code WRONG_SERVER} answers that name the server's generation, refreshes from the
 * servers (never from ZooKeeper), and batches split to the servers' request limits.
 */
class ClientRoutingTest extends PsNetTestBase {

    private static final int DIM = 4;

    /** Member servers m0..m(n-1), none owning anything yet. */
    private List<PsServer> members(String provider, int n, PsConfig config, List<String> addresses) {
        List<PsServer> servers = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ParameterServer ps = ParameterServer.create(config);
            PsServer server = PsServer.openMember(ps, "m" + i, null, rpc(), false);
            addresses.add(server.listen(config(provider)));
            track(ps, server);
            servers.add(server);
        }
        return servers;
    }

    private static RoutingTable table(long generation, List<String> addresses, int[] owners) {
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < addresses.size(); i++) {
            ids.add("m" + i);
        }
        return RoutingTable.of(generation, ids, addresses, owners);
    }

    private static int[] evenOwners(int servers) {
        int[] owners = new int[RoutingTable.GROUPS];
        for (int g = 0; g < owners.length; g++) {
            owners[g] = g * servers / RoutingTable.GROUPS;
        }
        return owners;
    }

    @ParameterizedTest
    @MethodSource("providers")
    void clientFollowsANewTableWithoutBeingRecreated(String provider) {
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = members(provider, 2, PsConfig.defaults(), addresses);
        RoutingTable first = table(5, addresses, evenOwners(2));
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, List.of(addresses.get(1)));
        assertEquals(5, client.routingTable().generation());
        assertEquals(addresses, client.routingTable().addresses());
        client.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));

        long[] ids = new long[200];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i;
        }
        float[] ones = new float[ids.length * DIM];
        java.util.Arrays.fill(ones, -1f);
        client.push("t", ids, ones);

        // Every group to server 1: server 0 now refuses, naming generation 6.
        int[] all1 = new int[RoutingTable.GROUPS];
        java.util.Arrays.fill(all1, 1);
        RoutingTable second = table(6, addresses, all1);
        servers.forEach(s -> s.install(second));
        long retriesBefore = client.retries();
        float[] rows = client.pull("t", ids);
        assertTrue(client.retries() > retriesBefore, "the parts for server 0 were refused and retried");
        assertEquals(6, client.routingTable().generation());
        for (int i = 0; i < ids.length; i++) {
            boolean onOne = first.slots().serverOf(ids[i]) == 1;
            // Rows did not move in this test: server 1 kept its own, the others start fresh.
            assertEquals(onOne ? 1f : 0f, rows[i * DIM], "id " + ids[i]);
        }
        client.push("t", ids, ones);
        rows = client.pull("t", ids);
        for (int i = 0; i < ids.length; i++) {
            boolean onOne = first.slots().serverOf(ids[i]) == 1;
            assertEquals(onOne ? 2f : 1f, rows[i * DIM], "id " + ids[i]);
        }
        assertEquals(0, servers.get(0).routingTable().groupCount(0));
    }

    @ParameterizedTest
    @MethodSource("providers")
    void wrongServerNamesTheGenerationAndAServerBehindIsWaitedFor(String provider) throws Exception {
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = members(provider, 2, PsConfig.defaults(), addresses);
        RoutingTable first = table(1, addresses, evenOwners(2));
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, addresses);
        client.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long on0 = idOn(0, first);

        // A direct request to the wrong server: refused, naming its generation.
        PsException refused = expect(PsException.Code.WRONG_SERVER, () -> PsClient.join(
                client.call(1, PsDescriptor.PULL, (int) PsDescriptor.pullBytes(1, 1), body -> {
                    int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, PsDescriptor.nameBytes("t"), DIM, 1, 0);
                    PsDescriptor.stamp(body, 1, 0);
                    body.set(PsDescriptor.LONG, at, on0);
                })).release());
        assertEquals(1, PsDescriptor.wrongServerGeneration(refused));

        // Server 1 learns generation 2 (all groups its own) before server 0 does.
        int[] all1 = new int[RoutingTable.GROUPS];
        java.util.Arrays.fill(all1, 1);
        RoutingTable second = table(2, addresses, all1);
        servers.get(1).install(second);
        float[] g = {-1f, -1f, -1f, -1f};
        client.push("t", new long[] {on0}, g); // server 0 still owns it in generation 1
        servers.get(0).install(second);
        client.push("t", new long[] {on0}, g); // refused by server 0, retried at server 1
        assertEquals(2, client.routingTable().generation());
        assertArrayEquals(new float[] {1f, 1f, 1f, 1f}, client.pull("t", new long[] {on0}));
        assertEquals(-1, PsDescriptor.wrongServerGeneration(new PsException(PsException.Code.WRONG_SERVER, "x")));
    }

    @ParameterizedTest
    @MethodSource("providers")
    void batchesAboveTheLimitsAreSplit(String provider) {
        int limitIds = 16;
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = members(provider, 2, PsConfig.defaults().withRequestLimits(limitIds, 1 << 20),
                addresses);
        RoutingTable first = table(1, addresses, evenOwners(2));
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, addresses);
        client.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));
        long[] ids = new long[10 * limitIds + 3];
        float[] grads = new float[ids.length * DIM];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = 1000 + i % (ids.length - 5); // a few duplicates, summed
            for (int j = 0; j < DIM; j++) {
                grads[i * DIM + j] = -(i + 1);
            }
        }
        client.push("t", ids, grads);
        float[] expected = new float[ids.length * DIM];
        java.util.Map<Long, Float> sum = new java.util.HashMap<>();
        for (int i = 0; i < ids.length; i++) {
            sum.merge(ids[i], (float) (i + 1), Float::sum);
        }
        for (int i = 0; i < ids.length; i++) {
            for (int j = 0; j < DIM; j++) {
                expected[i * DIM + j] = sum.get(ids[i]);
            }
        }
        assertArrayEquals(expected, client.pull("t", ids));
        try (PsClient.PullView view = PsClient.join(client.pullView("t", ids))) {
            for (int i = 0; i < ids.length; i++) {
                assertEquals(expected[i * DIM], view.get(i, 0));
            }
        }
        float[] out = new float[ids.length * DIM];
        client.pull("t", ids, 0, ids.length, out);
        assertArrayEquals(expected, out);
    }

    private static long idOn(int server, RoutingTable table) {
        long id = 0;
        while (table.slots().serverOf(id) != server) {
            id++;
        }
        return id;
    }
}
