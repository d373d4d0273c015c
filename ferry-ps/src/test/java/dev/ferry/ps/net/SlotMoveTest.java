package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;

/**
 * Slot groups that move between member servers under a continuous push and pull workload, with
 * the flip installed in either order on the two servers: SGD with learning rate 1 and a unique
 * integer gradient per push, so that after the moves every row must equal exactly the sum of the
 * acknowledged pushes (none lost, none applied twice), and the one client follows every move.
 */
class SlotMoveTest extends PsNetTestBase {

    private static final int DIM = 2;
    private static final int KEYS = 512;

    @ParameterizedTest
    @MethodSource("providers")
    void pushesSurviveMovesExactly(String provider) throws Exception {
        List<String> addresses = new ArrayList<>();
        List<PsServer> servers = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            ParameterServer ps = ParameterServer.create(PsConfig.defaults());
            PsServer server = PsServer.openMember(ps, "m" + i, null, rpc(), false);
            addresses.add(server.listen(config(provider)));
            track(ps, server);
            servers.add(server);
        }
        List<String> ids = List.of("m0", "m1", "m2");
        int[] owners = new int[RoutingTable.GROUPS];
        for (int g = 0; g < owners.length; g++) {
            owners[g] = g < RoutingTable.GROUPS / 2 ? 0 : 1; // m2 owns nothing yet
        }
        AtomicLong generation = new AtomicLong(1);
        RoutingTable first = RoutingTable.of(generation.get(), ids, addresses, owners);
        servers.forEach(s -> s.install(first));
        PsClient client = client(provider, List.of(addresses.get(0)));
        client.createTable(TableConfig.of("t", DIM, Optimizer.sgd(1)));

        double[] acked = new double[KEYS];
        AtomicInteger nextGradient = new AtomicInteger(1);
        AtomicBoolean stop = new AtomicBoolean();
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        AtomicLong pushes = new AtomicLong();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<Future<?>> workers = new ArrayList<>();
        for (int w = 0; w < 3; w++) {
            long seed = w;
            workers.add(pool.submit(() -> {
                SplittableRandom random = new SplittableRandom(seed);
                while (!stop.get()) {
                    long[] batch = new long[8];
                    for (int i = 0; i < batch.length; i++) {
                        batch[i] = random.nextInt(KEYS);
                    }
                    int k = nextGradient.getAndIncrement();
                    float[] grads = new float[batch.length * DIM];
                    java.util.Arrays.fill(grads, -k);
                    try {
                        client.push("t", batch, grads);
                    } catch (RuntimeException e) {
                        failures.add(e);
                        return;
                    }
                    synchronized (acked) {
                        for (long id : batch) {
                            acked[(int) id] += k; // duplicates in a batch are summed: k each time
                        }
                    }
                    pushes.incrementAndGet();
                }
            }));
        }
        workers.add(pool.submit(() -> {
            long[] all = new long[KEYS];
            for (int i = 0; i < KEYS; i++) {
                all[i] = i;
            }
            while (!stop.get()) {
                try {
                    client.pull("t", all);
                } catch (RuntimeException e) {
                    failures.add(e);
                    return;
                }
            }
        }));
        waitForPushes(pushes, 100);
        // Move 1: a quarter of m0's groups to m2; the new owner installs the flip first.
        move(servers, ids, addresses, owners, generation, 1, 0, 2, 0, RoutingTable.GROUPS / 8, true);
        waitForPushes(pushes, pushes.get() + 100);
        // Move 2: a quarter of m1's groups to m2; the old owner installs the flip first.
        move(servers, ids, addresses, owners, generation, 2, 1, 2, RoutingTable.GROUPS / 2,
                RoutingTable.GROUPS / 2 + RoutingTable.GROUPS / 8, false);
        waitForPushes(pushes, pushes.get() + 100);
        // Move 3: back from m2 to m0 (m0 holds stale rows of those groups from before move 1).
        move(servers, ids, addresses, owners, generation, 3, 2, 0, 0, RoutingTable.GROUPS / 16, true);
        waitForPushes(pushes, pushes.get() + 100);
        stop.set(true);
        for (Future<?> f : workers) {
            f.get(60, TimeUnit.SECONDS);
        }
        pool.shutdown();
        assertTrue(failures.isEmpty(), () -> "failed: " + failures);
        assertEquals(generation.get(), client.routingTable().generation(), "the client followed every move");
        long[] all = new long[KEYS];
        for (int i = 0; i < KEYS; i++) {
            all[i] = i;
        }
        float[] rows = client.pull("t", all);
        for (int i = 0; i < KEYS; i++) {
            for (int j = 0; j < DIM; j++) {
                assertEquals((float) acked[i], rows[i * DIM + j], "id " + i + " after " + pushes.get() + " pushes");
            }
        }
        assertTrue(servers.get(2).routingTable().groupCount(2) > 0);
    }

    /** Moves groups [from, to) from server {@code a} to {@code b}, then flips in the order asked. */
    private static void move(List<PsServer> servers, List<String> ids, List<String> addresses, int[] owners,
            AtomicLong generation, long moveId, int a, int b, int fromGroup, int toGroup, boolean newOwnerFirst) {
        int[] groups = new int[toGroup - fromGroup];
        for (int g = fromGroup; g < toGroup; g++) {
            groups[g - fromGroup] = g;
            assertEquals(a, owners[g]);
        }
        servers.get(a).moveOut(moveId, groups, addresses.get(b));
        for (int g : groups) {
            owners[g] = b;
        }
        RoutingTable flipped = RoutingTable.of(generation.incrementAndGet(), ids, addresses, owners);
        List<PsServer> order = new ArrayList<>(servers);
        if (!newOwnerFirst) {
            java.util.Collections.reverse(order);
        }
        order.remove(servers.get(b));
        order.add(newOwnerFirst ? 0 : order.size(), servers.get(b));
        for (PsServer s : order) {
            s.install(flipped);
            try {
                Thread.sleep(5); // let pushes meet the half-installed table
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        servers.get(a).endMove(moveId);
        servers.get(b).endMove(moveId);
    }

    private static void waitForPushes(AtomicLong pushes, long atLeast) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (pushes.get() < atLeast && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
    }
}
