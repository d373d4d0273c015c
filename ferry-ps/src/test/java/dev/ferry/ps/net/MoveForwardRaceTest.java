package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;

/**
 * The interleaving behind a push counted twice during a move, forced with a hook: push A is
 * applied on the old owner and held before its forward; push B on the same id comes next; then
 * the new owner installs the flip and A's forward meets the fence. Had B copied and forwarded
 * its row (which holds A) before the flip, A, answered {@code WRONG_SERVER} and retried at the
 * new owner, would count twice there. Each push must count exactly once.
 */
class MoveForwardRaceTest extends PsNetTestBase {

    private static final long ID = 7;

    @ParameterizedTest
    @MethodSource("providers")
    void aPushRefusedByTheFenceIsInNoForwardedRow(String provider) throws Exception {
        List<String> ids = List.of("m0", "m1");
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = new ArrayList<>();
        openMembers(provider, ids, addresses, servers, null, false);
        int[] owners = new int[RoutingTable.GROUPS];
        servers.forEach(s -> s.install(RoutingTable.of(1, ids, addresses, owners)));
        PsClient client = client(provider, List.of(addresses.get(0)));
        client.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
        int group = RoutingTable.groupOf(ID);
        servers.get(0).moveOut(1, new int[] {group}, addresses.get(1));

        CountDownLatch aApplied = new CountDownLatch(1);
        CountDownLatch releaseA = new CountDownLatch(1);
        AtomicBoolean first = new AtomicBoolean(true);
        MoveSource.afterMovingApplied = () -> {
            if (first.getAndSet(false)) {
                aApplied.countDown();
                try {
                    releaseA.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
        try {
            CompletableFuture<Void> a = client.pushAsync("t", new long[] {ID}, new float[] {-1, -1});
            assertTrue(aApplied.await(30, TimeUnit.SECONDS), "push A reached its forward");
            CompletableFuture<Void> b = client.pushAsync("t", new long[] {ID}, new float[] {-2, -2});
            try {
                b.get(500, TimeUnit.MILLISECONDS); // before the fix, B was forwarded (holding A) meanwhile
            } catch (java.util.concurrent.TimeoutException waitsBehindA) {
                // B waits until A's forward is over: the order the fix enforces
            }
            owners[group] = 1;
            RoutingTable flipped = RoutingTable.of(2, ids, addresses, owners);
            servers.get(1).install(flipped); // the new owner first: A's forward meets the fence
            releaseA.countDown();
            servers.get(0).install(flipped);
            a.get(30, TimeUnit.SECONDS);
            b.get(30, TimeUnit.SECONDS);
        } finally {
            releaseA.countDown();
            MoveSource.afterMovingApplied = null;
        }
        assertFalse(first.get(), "the hook ran");
        servers.forEach(s -> s.endMove(1));
        assertArrayEquals(new float[] {3, 3}, client.pull("t", new long[] {ID}), "each push counted once");
    }
}
