package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsConfig;
import dev.ferry.ps.TableConfig;
import dev.ferry.rpc.PeerUnavailableException;
import dev.ferry.rpc.RpcException;
import dev.ferry.rpc.RpcTimeoutException;

/**
 * An operation's retries end with its budget, not only with its count of attempts: a part whose
 * server is gone fails once the budget is spent, with the failure that it kept meeting, and a
 * part of the same batch on a live server is unaffected. Two servers on tcp, the second closed.
 */
@Timeout(120)
class RetryBudgetTest extends PsNetTestBase {

    /** Far more attempts than the budget leaves room for: backoffs alone for 39 retries are over 6 s. */
    private static final int ATTEMPTS = 40;
    private static final long BUDGET_MILLIS = 1_500;

    private PsClient deadServerClient(Cluster c) {
        c.client().createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
        PsClient client = PsClient.connect(rpc().withDefaultDeadlineMillis(500), config("tcp"), c.addresses());
        track(client);
        client.retryPolicy(ATTEMPTS, 200, BUDGET_MILLIS);
        c.rpcServers().get(1).close();
        return client;
    }

    private final List<PsClient> clients = new ArrayList<>();

    private void track(PsClient client) {
        clients.add(client);
    }

    /** Before the base class closes the servers. */
    @AfterEach
    void closeClients() {
        clients.forEach(PsClient::close);
    }

    private static void assertGaveUpOnTheDeadServer(Throwable failure) {
        Throwable cause = ClientCalls.unwrap(failure);
        assertTrue(cause instanceof PeerUnavailableException || cause instanceof RpcTimeoutException,
                "the failure the retries kept meeting surfaces: " + cause);
    }

    @Test
    void aBlockingPullToAGoneServerFailsWhenItsBudgetIsSpent() {
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        PsClient client = deadServerClient(c);
        long dead = idOn(1, 2, 0);
        long live = idOn(0, 2, 0);
        float[] out = new float[4];
        RpcException e = assertThrows(RpcException.class,
                () -> client.pull("t", new long[] {live, dead}, 0, 2, out));
        assertGaveUpOnTheDeadServer(e);
        assertTrue(client.retries() < ATTEMPTS - 1, "the budget ended the retries, not their count: " + client.retries());
        assertTrue(client.retries() >= 1, "the part was retried within its budget");
        assertArrayEquals(new float[] {0, 0}, client.pull("t", new long[] {live}), "the live server still answers");
    }

    @Test
    void aBigBlockingPullToAGoneServerFailsWhenItsBudgetIsSpent() {
        // Over SparseCalls.SCATTER_AS_ANSWERED_IDS ids on both servers: the live server's part is
        // scattered as it answers while the gone server's part is retried until the budget is spent.
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        PsClient client = deadServerClient(c);
        long[] ids = new long[SparseCalls.SCATTER_AS_ANSWERED_IDS + 100];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i;
        }
        float[] out = new float[ids.length * 2];
        RpcException e = assertThrows(RpcException.class, () -> client.pull("t", ids, 0, ids.length, out));
        assertGaveUpOnTheDeadServer(e);
        assertTrue(client.retries() < ATTEMPTS - 1, "the budget ended the retries, not their count: " + client.retries());
        assertTrue(client.retries() >= 1, "the part was retried within its budget");
        assertArrayEquals(new float[] {0, 0}, client.pull("t", new long[] {idOn(0, 2, 0)}),
                "the live server still answers");
    }

    @Test
    void anAsyncPullAndAPushToAGoneServerFailWhenTheirBudgetIsSpent() {
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        PsClient client = deadServerClient(c);
        long dead = idOn(1, 2, 0);
        ExecutionException pull = assertThrows(ExecutionException.class,
                () -> client.pullAsync("t", new long[] {dead}).get());
        assertGaveUpOnTheDeadServer(pull.getCause());
        long afterPull = client.retries();
        assertTrue(afterPull < ATTEMPTS - 1, "the budget ended the pull's retries: " + afterPull);
        RuntimeException push = assertThrows(RuntimeException.class,
                () -> client.push("t", new long[] {dead}, new float[] {1, 1}));
        assertGaveUpOnTheDeadServer(push);
        assertTrue(client.retries() - afterPull < ATTEMPTS - 1, "the budget ended the push's retries");
    }

    @Test
    void theCountStillEndsRetriesFirstWhenItIsSmaller() {
        Cluster c = cluster("tcp", 2, PsConfig.defaults(), null);
        PsClient client = deadServerClient(c);
        client.retryPolicy(3, 1, 60_000);
        long dead = idOn(1, 2, 0);
        assertThrows(RpcException.class, () -> client.pull("t", new long[] {dead}, 0, 1, new float[2]));
        assertEquals(2, client.retries(), "three attempts: two retries");
    }

    @Test
    void aRetrysDeadlineIsCutToWhatIsLeftOfTheBudget() {
        Cluster c = cluster("tcp", 1, PsConfig.defaults(), null);
        RoutingFollower routing = new RoutingFollower(new ClientCalls(c.client().rpcClient()), c.addresses());
        RetryPolicy policy = new RetryPolicy(routing, 10_000);
        assertEquals(PsClient.DEFAULT_RETRY_BUDGET_MILLIS, policy.budgetMillis());
        assertEquals(10_000, policy.retryDeadlineMillis(policy.start()), "a fresh budget leaves the whole deadline");
        policy.set(5, 10, 2_000);
        long cut = policy.retryDeadlineMillis(policy.start());
        assertTrue(cut > 0 && cut <= 2_000, "cut to the budget: " + cut);
        long spent = System.nanoTime() - 1;
        assertEquals(1, policy.retryDeadlineMillis(spent), "a spent budget leaves the minimum");
        RpcTimeoutException timeout = new RpcTimeoutException(1, "x", 500, "no answer");
        assertTrue(policy.retryable(timeout, true, 0, policy.start()), "a pull within its budget is retried");
        assertTrue(!policy.retryable(timeout, true, 0, spent), "not once the budget is spent");
        assertEquals(60_000, PsClient.defaultRetryBudgetMillis(10_000), "the default is 60 s at a 10 s deadline");
        assertEquals(80_000, PsClient.defaultRetryBudgetMillis(40_000), "or two deadlines if longer");
        assertThrows(IllegalArgumentException.class, () -> policy.set(5, 10, 0));
    }
}
