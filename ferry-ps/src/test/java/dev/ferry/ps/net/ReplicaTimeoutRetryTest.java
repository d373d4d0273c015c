package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.ParameterServer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.PsException;
import dev.ferry.ps.TableConfig;

/**
 * A push whose primary freezes mid-call (a hook holds its handler thread) while its backup is
 * promoted: the client's call times out, and the client sends the push again, same dedupe id,
 * to the new primary once it sees the newer routing table. It must be acknowledged and applied
 * exactly once, whether the primary froze before its apply (the new primary applies it; the
 * thawed one is fenced out by epoch) or after its backup had it (the new primary dedupes it).
 * In-process members on tcp, a client deadline of 2 s (above the replication timeout, as in a cluster).
 */
class ReplicaTimeoutRetryTest extends PsNetTestBase {

    private static final long ID = 11;

    private final List<String> ids = List.of("m0", "m1");
    private final List<String> addresses = new ArrayList<>();
    private final List<PsServer> servers = new ArrayList<>();
    private final List<ParameterServer> stores = new ArrayList<>();
    private final CountDownLatch thaw = new CountDownLatch(1);
    private final AtomicReference<Thread> frozen = new AtomicReference<>();

    private final List<AutoCloseable> clients = new ArrayList<>();

    /** Before the base class closes the servers: thaw, unhook, close this test's clients. */
    @AfterEach
    void thawAndClose() throws Exception {
        thaw.countDown();
        awaitHandlerDone();
        Replicator.afterLocked = null;
        Replicator.afterReplicated = null;
        for (AutoCloseable c : clients) {
            c.close();
        }
    }

    private PsClient start() {
        openMembers("tcp", ids, addresses, servers, stores, true);
        install(1, 0, 0, true, 0, 1);
        PsClient client = PsClient.connect(rpc().withDefaultDeadlineMillis(2_000), config("tcp"), addresses);
        clients.add(client);
        return client;
    }

    /** Generation {@code gen}: every group owned by {@code owner} at {@code epoch}, the other member its backup or not. */
    private void install(long gen, int owner, long epoch, boolean backup, int... on) {
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, owner);
        long[] epochs = new long[RoutingTable.GROUPS];
        Arrays.fill(epochs, epoch);
        int[][] backups = new int[RoutingTable.GROUPS][];
        for (int g = 0; g < backups.length; g++) {
            backups[g] = backup ? new int[] {1 - owner} : null;
        }
        RoutingTable table = RoutingTable.of(gen, ids, addresses, owners);
        for (int s : on) {
            servers.get(s).install(table, Replicas.of(gen, epochs, backups, 1));
        }
    }

    /** The hook: the first push on m0 promotes m1 (only m1 knows) and freezes until the test thaws it. */
    private Runnable freezeOnce() {
        AtomicBoolean first = new AtomicBoolean(true);
        return () -> {
            if (servers.get(0).index() == 0 && first.getAndSet(false)) {
                install(2, 1, 1, false, 1);
                frozen.set(Thread.currentThread());
                try {
                    thaw.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        };
    }

    /** Waits until the frozen handler left the push (its answer goes to a call the client gave up). */
    private void awaitHandlerDone() throws InterruptedException {
        Thread t = frozen.get();
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t != null && System.nanoTime() < until
                && Arrays.stream(t.getStackTrace()).anyMatch(f -> f.getClassName().equals(PsServer.class.getName()))) {
            Thread.sleep(5);
        }
    }

    private float[] row(int server) {
        float[] out = new float[2];
        stores.get(server).pull("t", 2, new long[] {ID}, 0, 1, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void frozenAfterItsBackupHadThePushTheRetryIsDeduped() throws Exception {
        PsClient client = start();
        Replicator.afterReplicated = freezeOnce();
        client.push("t", new long[] {ID}, new float[] {-3, -3});
        assertTrue(frozen.get() != null, "the primary froze mid-call");
        assertTrue(client.retries() > 0, "the timed-out push was sent again");
        assertArrayEquals(new float[] {3, 3}, row(1), "the new primary had it from replication and deduped the retry");
        thaw.countDown();
        awaitHandlerDone();
        assertArrayEquals(new float[] {3, 3}, row(1), "once");
        assertArrayEquals(new float[] {3, 3}, client.pull("t", new long[] {ID}));
    }

    @Test
    void frozenBeforeItsApplyTheRetryIsAppliedOnceAtTheNewPrimary() throws Exception {
        PsClient client = start();
        Replicator.afterLocked = freezeOnce();
        client.push("t", new long[] {ID}, new float[] {-4, -4});
        assertTrue(frozen.get() != null, "the primary froze mid-call");
        assertArrayEquals(new float[] {0, 0}, row(0), "not applied on the frozen primary yet");
        assertArrayEquals(new float[] {4, 4}, row(1), "applied at the new primary");
        thaw.countDown();
        awaitHandlerDone();
        // The thawed primary applies it on its own rows, but its replication is fenced at m1.
        assertArrayEquals(new float[] {4, 4}, row(1), "once: the deposed primary's rows were refused");
        assertArrayEquals(new float[] {4, 4}, client.pull("t", new long[] {ID}));
    }

    @Test
    void aFixedClusterDoesNotRetryATimedOutPush() {
        // Its servers keep no dedupe ids: a timed-out push there fails rather than risk a second apply.
        Cluster c = cluster("tcp", 1, PsConfig.defaults(), null);
        c.client().createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
        RetryPolicy policy = new RetryPolicy(routingOf(c.addresses()), 2_000);
        assertTrue(!policy.retryable(new dev.ferry.rpc.RpcTimeoutException(1, "x", 500, "no answer"), false, 0, policy.start()),
                "a fixed cluster's push is not retried after a timeout");
        assertTrue(policy.retryable(new dev.ferry.rpc.RpcTimeoutException(1, "x", 500, "no answer"), true, 0, policy.start()),
                "a pull is");
        assertTrue(!policy.retryable(new PsException(PsException.Code.CLOSED, "x"), false, 0, policy.start()));
        assertTrue(policy.retryable(new PsException(PsException.Code.BUSY, "x"), false, 0, policy.start()),
                "a push refused unapplied is retried everywhere");
        assertTrue(!policy.retryable(new PsException(PsException.Code.UNCONFIRMED, "x"), false, 0, policy.start()),
                "a push applied with a copy unfinished is not retried where servers keep no dedupe ids");
        assertTrue(policy.retryable(new PsException(PsException.Code.UNCONFIRMED, "x"), true, 0, policy.start()));
    }

    private RoutingFollower routingOf(List<String> fixed) {
        dev.ferry.rpc.RpcClient rpc = dev.ferry.rpc.RpcClient.open(rpc(), config("tcp"));
        clients.add(rpc);
        RoutingFollower f = new RoutingFollower(new ClientCalls(rpc), fixed);
        ClientCalls.join(f.fetchRouting(fixed.get(0)));
        return f;
    }
}
