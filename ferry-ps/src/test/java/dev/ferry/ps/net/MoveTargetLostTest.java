package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A move P -&gt; T whose target goes away in the middle (its server closed: connections refused)
 * while a client pushes to the moving group. P's pushes wait on forwards to T: the one holding
 * the forwarding lock runs out of time ({@code UNCONFIRMED}, or the client's deadline first), the
 * ones behind it are refused unapplied ({@code BUSY}); the client sends each again with its dedupe
 * id, and once the move is cancelled (3 s later, as the controller does when T's member node goes) P
 * acknowledges them. No push reaches the caller as an error (before {@code BUSY} and {@code
 * UNCONFIRMED} they did, as {@code CLOSED}), and every row ends exactly the sum of the pushes
 * acknowledged to it: none lost, none counted twice. In-process members on tcp, routing tables
 * installed by hand, no backups (a controller's members with r = 1 dedupe pushes).
 */
@Timeout(120)
class MoveTargetLostTest extends RawMembersTestBase {

    private static final int P = 0;
    private static final int T = 1;
    private static final int MOVING = 8;

    private final List<String> ids = List.of("p", "t");

    @Test
    void pushesToAMovingGroupWhoseTargetWentAwayAreRetriedUntilTheMoveIsCancelled() throws Exception {
        startMembers(ids, true);
        int[] owners = new int[RoutingTable.GROUPS];
        int[][] backups = new int[RoutingTable.GROUPS][];
        Arrays.fill(backups, new int[0]);
        RoutingTable table = RoutingTable.of(1, ids, addresses, owners);
        for (PsServer s : servers) {
            s.install(table, Replicas.of(1, new long[RoutingTable.GROUPS], backups, 1));
        }
        // Eight ids in one group (the one that moves), eight in others.
        int group = RoutingTable.groupOf(1);
        long[] keys = new long[2 * MOVING];
        int moving = 0;
        int staying = MOVING;
        for (long id = 1; moving < MOVING || staying < keys.length; id++) {
            if (RoutingTable.groupOf(id) == group && moving < MOVING) {
                keys[moving++] = id;
            } else if (RoutingTable.groupOf(id) != group && staying < keys.length) {
                keys[staying++] = id;
            }
        }
        try (PsClient client = PsClient.connect(rpc().withDefaultDeadlineMillis(2_000), config("tcp"),
                List.of(addresses.get(P)))) {
            Pushers pushers = new Pushers(client, keys);
            try {
                pushers.await(50);
                servers.get(P).moveOut(1, new int[] {group}, addresses.get(T));
                pushers.await(50); // forwarded to T
                servers.get(T).close();
                // Past the client's 2 s deadline: the pushes to the group wait on forwards nobody
                // answers and come back BUSY or UNCONFIRMED, and the client sends them again.
                Thread.sleep(3_000);
                servers.get(P).endMove(1); // the controller cancels the move: P keeps the group
                pushers.await(50);
            } finally {
                pushers.stop();
            }
            assertTrue(pushers.failures.isEmpty(), () -> "pushes failed: " + pushers.failures);
            float[] expected = new float[2 * keys.length];
            Arrays.fill(expected, pushers.sum.get()); // every push goes to every key
            assertArrayEquals(expected, client.pull("t", keys), "every row is the sum of its acknowledged pushes");
            assertTrue(client.retries() > 0, "the client sent pushes again");
        }
    }

    /** Two threads pushing unique integer gradients to every key, summing those acknowledged. */
    private static final class Pushers {

        final AtomicLong acked = new AtomicLong();
        /** The sum of the acknowledged gradients: every key's exact value. */
        final AtomicLong sum = new AtomicLong();
        final ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        private final AtomicInteger next = new AtomicInteger(1);
        private final AtomicBoolean stopping = new AtomicBoolean();
        private final List<Thread> threads = new ArrayList<>();

        Pushers(PsClient client, long[] keys) {
            for (int t = 0; t < 2; t++) {
                threads.add(Thread.ofPlatform().name("move-target-lost-pusher-" + t).start(() -> {
                    float[] gradients = new float[2 * keys.length];
                    while (!stopping.get() && failures.isEmpty()) {
                        int g = next.getAndIncrement();
                        Arrays.fill(gradients, -g);
                        try {
                            client.push("t", keys, gradients);
                        } catch (RuntimeException e) {
                            failures.add(e);
                            return;
                        }
                        sum.addAndGet(g);
                        acked.incrementAndGet();
                    }
                }));
            }
        }

        /** Waits for {@code n} more acknowledged pushes (at most 60 s), or a failure. */
        void await(long n) throws InterruptedException {
            long target = acked.get() + n;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (acked.get() < target && failures.isEmpty()) {
                assertTrue(System.nanoTime() < deadline, "timed out waiting for " + n + " more pushes");
                Thread.sleep(5);
            }
            assertTrue(failures.isEmpty(), () -> "pushes failed: " + failures);
        }

        void stop() throws InterruptedException {
            stopping.set(true);
            for (Thread t : threads) {
                t.join(60_000);
            }
        }
    }
}
