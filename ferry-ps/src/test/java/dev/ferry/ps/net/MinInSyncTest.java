package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;

/**
 * Below the replicas' {@code minInSync} a primary refuses pushes, sparse and dense, with
 * {@code NOT_ENOUGH_REPLICAS} and applies nothing (durability first); pulls are still served, and
 * pushes are taken again once a table with enough copies (here: a lower minimum) is installed.
 */
class MinInSyncTest extends PsNetTestBase {

    @Test
    void pushesAreRefusedBelowMinInSyncAndNothingIsApplied() {
        ParameterServer ps = ParameterServer.create(PsConfig.defaults());
        PsServer server = PsServer.openMember(ps, "m", null, rpc(), false);
        String address = server.listen(config("local"));
        track(ps, server);
        RoutingTable one = RoutingTable.of(1, List.of("m"), List.of(address), new int[RoutingTable.GROUPS]);
        assertTrue(server.install(one, Replicas.of(1, new long[RoutingTable.GROUPS], new int[RoutingTable.GROUPS][], 2)));
        ps.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
        ps.createDense(new DenseConfig("d", 8, Optimizer.sgd(1), Initializer.zeros()));
        PsClient client = client("local", List.of(address));
        long[] ids = {5, 6, 7};
        float[] g = new float[ids.length * 2];
        Arrays.fill(g, 1f);
        float[] before = client.pull("t", ids);

        PsException e = expect(PsException.Code.NOT_ENOUGH_REPLICAS, () -> client.push("t", ids, g));
        assertTrue(e.getMessage().contains("has 1 in-sync copies, fewer than the 2 a push needs; the push was not applied"),
                e::getMessage);
        e = expect(PsException.Code.NOT_ENOUGH_REPLICAS, () -> client.pushDense("d", new float[8]));
        assertTrue(e.getMessage().contains("fewer than the 2 a push needs"), e::getMessage);
        assertEquals(0, client.retries(), "a refusal for durability is not retried");
        assertArrayEquals(before, client.pull("t", ids));
        assertEquals(0, ps.dense("d").steps());

        RoutingTable two = RoutingTable.of(2, List.of("m"), List.of(address), new int[RoutingTable.GROUPS]);
        assertTrue(server.install(two, Replicas.of(2, new long[RoutingTable.GROUPS], new int[RoutingTable.GROUPS][], 1)));
        client.push("t", ids, g);
        client.pushDense("d", new float[8]);
        float[] after = client.pull("t", ids);
        for (int i = 0; i < after.length; i++) {
            assertEquals(before[i] - 1f, after[i], 0f);
        }
        assertEquals(1, ps.dense("d").steps());
    }
}
