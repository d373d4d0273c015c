package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import dev.ferry.ps.PsException;

/**
 * A client connecting to cluster members that have joined but have no routing table yet (a
 * cluster just started): they answer {@code WRONG_SERVER} at generation -1, and the client asks
 * again until its deadline instead of failing at once; without a table by then it fails with
 * that answer.
 */
class ConnectBeforeRoutingTest extends RawMembersTestBase {

    private final List<String> ids = List.of("m0", "m1");

    private void install() {
        int[] owners = new int[RoutingTable.GROUPS];
        for (int g = 0; g < owners.length; g++) {
            owners[g] = g % 2;
        }
        RoutingTable table = RoutingTable.of(1, ids, addresses, owners);
        int[][] backups = new int[RoutingTable.GROUPS][];
        Arrays.fill(backups, new int[0]);
        for (PsServer server : servers) {
            server.install(table, Replicas.of(1, new long[RoutingTable.GROUPS], backups, 1));
        }
    }

    @Test
    void aClientConnectingBeforeTheFirstTableWaitsForIt() throws Exception {
        startMembers(ids, true);
        CompletableFuture<PsClient> connecting = CompletableFuture.supplyAsync(
                () -> PsClient.connect(rpc().withDefaultDeadlineMillis(20_000), config("tcp"), addresses));
        Thread.sleep(300);
        assertFalse(connecting.isDone(), "no member has a routing table: the client waits");
        install();
        try (PsClient client = connecting.get(30, TimeUnit.SECONDS)) {
            long[] keys = {1, 2, 3, 1_000_003};
            client.push("t", keys, new float[] {-1, -1, -2, -2, -3, -3, -4, -4});
            assertArrayEquals(new float[] {1, 1, 2, 2, 3, 3, 4, 4}, client.pull("t", keys));
        }
    }

    @Test
    void withoutATableWithinTheDeadlineTheClientFailsWithTheMembersAnswer() {
        startMembers(ids, true);
        long start = System.nanoTime();
        PsException e = expect(PsException.Code.WRONG_SERVER,
                () -> PsClient.connect(rpc().withDefaultDeadlineMillis(500), config("tcp"), addresses));
        assertTrue(e.getMessage().contains("no routing table yet"), e.getMessage());
        assertTrue(System.nanoTime() - start >= TimeUnit.MILLISECONDS.toNanos(500), "asked again until the deadline");
    }
}
