package dev.ferry.ps.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import dev.ferry.ps.DenseConfig;
import dev.ferry.ps.Initializer;
import dev.ferry.ps.Optimizer;
import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcMethod;
import dev.ferry.rpc.RpcResponse;
import dev.ferry.rpc.RequestWriter;

/**
 * A move P -&gt; T whose forward of push X runs out of time (a fault hook fails every attempt as
 * if T did not answer): X is applied and recorded on P and answered {@code UNCONFIRMED}. The next push
 * Y on the same row forwards the row, which holds X, to T; without X's id, X's retry at T after
 * the flip was applied a second time there. Now X's row goes to T again with X's id before Y's
 * forward. Sparse rows and dense tensors; raw requests with chosen dedupe ids, in-process members
 * on tcp, no backups (the move alone).
 */
class ForwardTimeoutTest extends RawMembersTestBase {

    private static final long ID = 7;
    private static final String TENSOR = "w";
    private static final int P = 0;
    private static final int T = 1;
    private static final int B = 2;

    private final List<String> ids = List.of("p", "t", "b");

    @AfterEach
    void clearFault() {
        MoveSource.forwardFault = null;
    }

    private void start() throws Exception {
        startMembers(ids, true);
        install(1, -1);
        byte[] name = PsDescriptor.nameBytes(TENSOR);
        DenseConfig config = new DenseConfig(TENSOR, 2, Optimizer.sgd(1), Initializer.zeros());
        call(P, PsDescriptor.CREATE_TABLE, PsDescriptor.createBytes(name.length),
                body -> PsDescriptor.writeCreate(body, name, config), 5_000);
    }

    /**
     * Generation {@code gen}: every group P's but {@code group}, which is T's at epoch 1 (-1:
     * none); replicas without backups, as a controller's members run with r = 1 (and dedupe).
     */
    private void install(long gen, int group) {
        install(gen, group, group < 0 ? P : T, group < 0 ? 0 : 1, new int[0], P, T, B);
    }

    /** Generation {@code gen}: {@code group} led by {@code owner} at {@code epoch} with {@code backups}; the rest P's. */
    private void install(long gen, int group, int owner, long epoch, int[] backups, int... on) {
        int[] owners = new int[RoutingTable.GROUPS];
        Arrays.fill(owners, P);
        long[] epochs = new long[RoutingTable.GROUPS];
        int[][] b = new int[RoutingTable.GROUPS][];
        if (group >= 0) {
            owners[group] = owner;
            epochs[group] = epoch;
            b[group] = backups;
        }
        RoutingTable table = RoutingTable.of(gen, ids, addresses, owners);
        Replicas replicas = Replicas.of(gen, epochs, b, 1);
        for (int s : on) {
            servers.get(s).install(table, replicas);
        }
    }

    /** The flip of move 1: generation 2, where T owns {@code group}, on every member; the move ended on P and T. */
    private void flip(int group) {
        install(2, group);
        servers.get(P).endMove(1);
        servers.get(T).endMove(1);
    }

    private PsException.Code call(int server, RpcMethod method, int bytes, RequestWriter writer, long deadline)
            throws Exception {
        try {
            RpcResponse r = raw.channel(addresses.get(server)).call(method, bytes, writer, deadline)
                    .get(15, TimeUnit.SECONDS);
            r.release();
            return null;
        } catch (ExecutionException e) {
            return refusal(e, addresses.get(server)).code();
        }
    }

    /** A raw push of {@code grad} on both weights of {@link #ID}'s row, or of the tensor if {@code dense}. */
    private PsException.Code push(boolean dense, int server, long generation, long dedupe, float grad, long deadline)
            throws Exception {
        if (dense) {
            byte[] name = PsDescriptor.nameBytes(TENSOR);
            return call(server, PsDescriptor.DENSE_PUSH, PsDescriptor.payloadOffset(name.length) + 8, body -> {
                int at = PsDescriptor.writeHeader(body, PsDescriptor.DENSE, name, 2, 2, 0);
                PsDescriptor.stamp(body, generation, dedupe);
                body.set(PsDescriptor.FLOAT, at, grad);
                body.set(PsDescriptor.FLOAT, at + 4, grad);
            }, deadline);
        }
        byte[] name = PsDescriptor.nameBytes("t");
        return call(server, PsDescriptor.PUSH, (int) PsDescriptor.pushBytes(name.length, 1, 2), body -> {
            int at = PsDescriptor.writeHeader(body, PsDescriptor.SPARSE, name, 2, 1, 0);
            PsDescriptor.stamp(body, generation, dedupe);
            body.set(PsDescriptor.LONG, at, ID);
            body.set(PsDescriptor.FLOAT, at + 8, grad);
            body.set(PsDescriptor.FLOAT, at + 12, grad);
        }, deadline);
    }

    private float[] value(boolean dense, int server) {
        float[] out = new float[2];
        if (dense) {
            stores.get(server).dense(TENSOR).read(0, 2, MemorySegment.ofArray(out));
        } else {
            stores.get(server).pull("t", 2, new long[] {ID}, 0, 1, MemorySegment.ofArray(out));
        }
        return out;
    }

    @Test
    void aSparsePushWhoseForwardRanOutOfTimeIsNotAppliedTwiceAtTheNewOwner() throws Exception {
        retryAfterTheFlipIsDeduped(false, RoutingTable.groupOf(ID));
    }

    @Test
    void aDensePushWhoseForwardRanOutOfTimeIsNotAppliedTwiceAtTheNewOwner() throws Exception {
        retryAfterTheFlipIsDeduped(true, DenseMove.groupOf(TENSOR));
    }

    /**
     * The same with a backup B of the group: X reached no backup (its group was moving), and Y's
     * rows, which hold X, went to B. The move is then cancelled and P lost before X's retry: B,
     * promoted, held X's effect without its id and applied the retry again. Now X's rows go to B
     * with its id before Y's.
     */
    @Test
    void aPushWhoseForwardRanOutOfTimeReachesTheBackupWithItsIdBeforeTheNextPush() throws Exception {
        for (boolean dense : new boolean[] {false, true}) {
            int group = dense ? DenseMove.groupOf(TENSOR) : RoutingTable.groupOf(ID);
            long base = dense ? 0x100 : 0x200;
            long a = base + 1;
            long x = base + 2;
            long y = base + 3;
            if (!dense) {
                start();
            }
            long gen = dense ? 10 : 2;
            install(gen, group, P, 0, new int[] {B}, P, T, B);
            assertNull(push(dense, P, gen, a, -1, 5_000), "A acknowledged at P");
            assertArrayEquals(new float[] {1, 1}, value(dense, B), "A replicated to B");
            servers.get(P).moveOut(gen, new int[] {group}, addresses.get(T));

            MoveSource.forwardFault = body -> PsDescriptor.generation(MemorySegment.ofArray(body)) == x;
            try {
                assertEquals(PsException.Code.UNCONFIRMED, push(dense, P, gen, x, -10, 700), "X not acknowledged");
            } catch (ExecutionException e) {
                assertEquals(dev.ferry.rpc.RpcTimeoutException.class, e.getCause().getClass(), e::toString);
            }
            assertNull(push(dense, P, gen, y, -100, 5_000), "Y on the same row (it waits for X to give up)");
            assertArrayEquals(new float[] {111, 111}, value(dense, B), "Y's row, holding X, reached B");

            // The move is cancelled (P keeps the group), then P is lost before X's client retries.
            servers.get(P).endMove(gen);
            servers.get(T).endMove(gen);
            if (dense) {
                servers.get(P).close();
            }
            install(gen + 1, group, B, 1, new int[0], B);
            assertNull(push(dense, B, gen + 1, x, -10, 5_000), "X's retry at the promoted B: deduped");
            assertNull(push(dense, B, gen + 1, y, -100, 5_000), "Y's retry at B: deduped");
            assertArrayEquals(new float[] {111, 111}, value(dense, B), (dense ? "dense" : "sparse")
                    + ": A, X and Y exactly once each");
            MoveSource.forwardFault = null;
        }
    }

    /**
     * X's forward fails until its deadline (3 s), holding the move's forwarding lock; Y on the same
     * row, with 0.7 s, waits for the lock and is refused {@code BUSY} before it changes anything
     * (it used to be {@code CLOSED}, which clients do not retry: the demo's failure when a move's
     * target had gone). Sent again with its id once X gave up, Y is applied exactly once.
     */
    @Test
    void aPushThatWaitedBehindAForwardOutOfTimeIsRefusedBusyUnappliedAndItsRetryCountsOnce() throws Exception {
        start();
        int group = RoutingTable.groupOf(ID);
        long a = 0x4A;
        long x = 0x4B;
        long y = 0x4C;
        assertNull(push(false, P, 1, a, -1, 5_000), "A acknowledged at P");
        servers.get(P).moveOut(1, new int[] {group}, addresses.get(T));
        CountDownLatch xHolds = new CountDownLatch(1);
        MoveSource.afterMovingApplied = xHolds::countDown;
        MoveSource.forwardFault = body -> PsDescriptor.generation(MemorySegment.ofArray(body)) == x;
        CompletableFuture<PsException.Code> xOutcome = CompletableFuture.supplyAsync(() -> {
            try {
                return push(false, P, 1, x, -10, 3_000);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        try {
            assertTrue(xHolds.await(10, TimeUnit.SECONDS), "X applied, its forward under way");
            assertEquals(PsException.Code.BUSY, push(false, P, 1, y, -100, 700), "Y refused while X held the row");
            assertArrayEquals(new float[] {11, 11}, value(false, P), "Y changed nothing");
            assertEquals(PsException.Code.UNCONFIRMED, xOutcome.get(15, TimeUnit.SECONDS), "X's forward ran out of time");
        } finally {
            MoveSource.afterMovingApplied = null;
        }
        MoveSource.forwardFault = null;
        assertNull(push(false, P, 1, y, -100, 5_000), "Y sent again: acknowledged");
        assertNull(push(false, P, 1, y, -100, 5_000), "and again: deduped");
        assertArrayEquals(new float[] {111, 111}, value(false, P), "A, X and Y exactly once each");
        assertArrayEquals(new float[] {111, 111}, value(false, T), "the target holds the same row");
    }

    /**
     * X's first forward gets no answer (it never reached T); before the next attempt T takes the
     * group (the flip), so the next attempt meets the fence. X is applied at P and may, for all P
     * knows, be in T's rows: {@code UNCONFIRMED} (it was {@code CLOSED}, which no client retries).
     * Sent again to T with its id, X counts once.
     */
    @Test
    void aSparsePushWhoseUnansweredForwardMetTheFenceIsUnconfirmedAndCountsOnceAtTheNewOwner() throws Exception {
        fencedAfterAnUnansweredForward(false, false);
    }

    @Test
    void aDensePushWhoseUnansweredForwardMetTheFenceIsUnconfirmedAndCountsOnceAtTheNewOwner() throws Exception {
        fencedAfterAnUnansweredForward(true, false);
    }

    /** As above, but X's first forward was merged at T and only its answer lost: X's retry at T is deduped. */
    @Test
    void aPushWhoseForwardWasMergedButUnansweredBeforeTheFenceIsDedupedAtTheNewOwner() throws Exception {
        fencedAfterAnUnansweredForward(false, true);
    }

    private void fencedAfterAnUnansweredForward(boolean dense, boolean merged) throws Exception {
        start();
        int group = dense ? DenseMove.groupOf(TENSOR) : RoutingTable.groupOf(ID);
        long a = 0x5A;
        long x = 0x5B;
        assertNull(push(dense, P, 1, a, -1, 5_000), "A acknowledged at P");
        servers.get(P).moveOut(1, new int[] {group}, addresses.get(T));
        assertArrayEquals(new float[] {1, 1}, value(dense, T), "the snapshot reached T");

        AtomicInteger attempts = new AtomicInteger();
        AtomicReference<PsException.Code> mergedOutcome = new AtomicReference<>();
        MoveSource.forwardFault = body -> {
            if (PsDescriptor.generation(MemorySegment.ofArray(body)) != x || attempts.incrementAndGet() > 1) {
                return false; // the second attempt goes out for real, and meets the fence
            }
            try {
                if (merged) { // T takes the rows (and X's id); the answer is what gets lost
                    mergedOutcome.set(call(T, PsDescriptor.MOVE_ROWS, body.length,
                            out -> MemorySegment.copy(MemorySegment.ofArray(body), 0, out, 0, body.length), 5_000));
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            install(2, group, T, 1, new int[0], T); // the flip reaches T before P's next attempt
            return true;
        };
        assertEquals(PsException.Code.UNCONFIRMED, push(dense, P, 1, x, -10, 5_000),
                "X applied at P, its copy's fate unknown, the rows T's now");
        assertEquals(2, attempts.get(), "one unanswered attempt, one fenced");
        MoveSource.forwardFault = null;
        if (merged) {
            assertNull(mergedOutcome.get(), "the merged copy was taken at T");
        }
        assertArrayEquals(new float[] {11, 11}, value(dense, P), "X applied at P once");
        assertArrayEquals(merged ? new float[] {11, 11} : new float[] {1, 1}, value(dense, T),
                merged ? "X's copy merged at T" : "X's copy never reached T");

        // X's client retries at P, which has not heard of the flip yet: sent on, T's fence refuses it.
        assertEquals(PsException.Code.WRONG_SERVER, push(dense, P, 1, x, -10, 5_000), "X's retry at P goes to T");
        assertArrayEquals(merged ? new float[] {11, 11} : new float[] {1, 1}, value(dense, T), "T unchanged by it");

        flip(group);
        assertNull(push(dense, T, 2, x, -10, 5_000), "X sent again to the new owner: acknowledged");
        assertNull(push(dense, T, 2, x, -10, 5_000), "and again: deduped");
        assertArrayEquals(new float[] {11, 11}, value(dense, T), "A and X exactly once each at the new owner");
    }

    private void retryAfterTheFlipIsDeduped(boolean dense, int group) throws Exception {
        start();
        long a = 0x1A;
        long x = 0x2B;
        long y = 0x3C;
        assertNull(push(dense, P, 1, a, -1, 5_000), "A acknowledged at P");
        servers.get(P).moveOut(1, new int[] {group}, addresses.get(T));
        assertArrayEquals(new float[] {1, 1}, value(dense, T), "the snapshot reached T");

        // X's own forwards (their body carries X's id) fail as if T did not answer; nothing else does.
        MoveSource.forwardFault = body -> PsDescriptor.generation(MemorySegment.ofArray(body)) == x;
        PsException.Code outcome;
        try {
            outcome = push(dense, P, 1, x, -10, 700);
        } catch (ExecutionException e) {
            assertEquals(dev.ferry.rpc.RpcTimeoutException.class, e.getCause().getClass(), e::toString);
            outcome = PsException.Code.UNCONFIRMED; // the client's deadline came first on a loaded machine
        }
        assertEquals(PsException.Code.UNCONFIRMED, outcome, "X applied at P, its forward out of time: not acknowledged");
        assertArrayEquals(new float[] {1, 1}, value(dense, T), "X's forward never reached T");

        // Y waits for X's forwarding to give up (one forward at a time), then forwards the row holding X.
        assertNull(push(dense, P, 1, y, -100, 5_000), "Y on the same row, forwarded with X's effect");
        assertArrayEquals(new float[] {111, 111}, value(dense, P));
        assertArrayEquals(new float[] {111, 111}, value(dense, T));

        // The flip: T owns the group; X's client retries there.
        flip(group);
        assertNull(push(dense, T, 2, x, -10, 5_000), "X's retry at T: deduped (its id came before Y's row)");
        assertNull(push(dense, T, 2, y, -100, 5_000), "Y's retry at T: deduped");
        assertArrayEquals(new float[] {111, 111}, value(dense, T), "A, X and Y exactly once each");
    }
}
