package dev.ferry.ps.net;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;

import dev.ferry.ps.PsException;
import dev.ferry.rpc.RpcChannel;
import dev.ferry.rpc.RpcMethod;

/**
 * The move a {@link MoveSource} is sending, and the forwarding of pushes to its target: the
 * {@link #forwarding} lock that orders a push's apply and forward against the snapshot, the
 * pushes whose forward ran out of time ({@link #unsent}), and the retry loop of one forward
 * ({@link #sendForward}). {@link #ended} is set (without the source's barrier) when the move is
 * over; everything else is fixed at the start.
 */
final class OutgoingMove {

    final long id;
    final boolean[] groups;
    final int firstGroup;
    final RpcChannel target;
    /** Held from the apply of a push's moving ids to the end of its forward, and per snapshot shard. */
    final ReentrantLock forwarding = new ReentrantLock();
    /** Pushes whose forward ran out of time: sent again with their ids before any later forward. */
    final UnsentForwards unsent = new UnsentForwards(forwarding);
    volatile boolean ended;

    OutgoingMove(long id, boolean[] groups, int firstGroup, RpcChannel target) {
        this.id = id;
        this.groups = groups;
        this.firstGroup = firstGroup;
        this.target = target;
    }

    /** Whether {@code group} is one of this move's. */
    boolean moves(int group) {
        return groups[group];
    }

    /** Takes {@link #forwarding} within the call's time, else refuses the push ({@code BUSY}), which changed nothing yet. */
    void lockForwarding(long remainingMillis) {
        PushLocks.lockOrBusy(forwarding, TimeUnit.MILLISECONDS.toNanos(remainingMillis - 100),
                "the pushes forwarded to the move's target " + target.address() + " ahead of it");
    }

    /**
     * Sends a forward ({@code what}: the moved rows, or a dense tensor's row) to the move's
     * target until it is taken, the move is cancelled, or the call's deadline comes. The caller
     * holds {@link #forwarding}.
     *
     * @param server      the sending server, asked whether it still owns the groups once the move ended
     * @param fault       tests only: true for a body makes its attempt fail as if the target did not answer
     * @param ifOutOfTime records the push as unsent when the deadline comes first
     * @throws PsException {@code WRONG_SERVER} if the target owns the groups already and never
     *                     saw this push (the push must be retried there); {@code UNCONFIRMED} if
     *                     it owns them and an earlier attempt may have been merged there, or if
     *                     the deadline came first (either way retried only where servers dedupe)
     */
    void sendForward(PsServer server, RpcMethod method, String what, byte[] body, long remainingMillis,
            Predicate<byte[]> fault, Runnable ifOutOfTime) {
        assert forwarding.isHeldByCurrentThread();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(0, remainingMillis - 100));
        boolean unknown = false; // an earlier attempt may have been merged there
        while (true) {
            if (ended && ownedBy(server)) {
                return; // cancelled while this push waited for the lock: the groups stay here, and so does the push
            }
            RuntimeException unreachable;
            // First the pushes whose forward ran out of time: this body may carry their effect.
            if (!unsent.flush(id, f -> MoveCalls.send(target, f.method(), f.body(), attemptMillis(deadline)))) {
                unreachable = new IllegalStateException("the pushes whose forward ran out of time could not be sent "
                        + "again first"); // this body was not sent: nothing more is unknown
            } else {
                try {
                    if (fault != null && fault.test(body)) {
                        throw new IllegalStateException("no answer (a test's fault)");
                    }
                    MoveCalls.send(target, method, body, attemptMillis(deadline));
                    return;
                } catch (RuntimeException e) {
                    unreachable = e;
                }
                if (unreachable instanceof PsException e && e.code() == PsException.Code.WRONG_SERVER) {
                    if (unknown) {
                        // The earlier copy either was merged there, with this push's id (the target
                        // records a forward's id with its rows), or never arrived: sent again to the
                        // new owner with the same id, it counts once either way.
                        throw new PsException(PsException.Code.UNCONFIRMED, "the push was applied here, and the move's "
                                + "target " + target.address() + " owns its " + what + " now; an earlier copy to it got "
                                + "no answer, so it may hold the push already: "
                                + "sent again there with the same dedupe id, it counts once");
                    }
                    // Fenced: the target owns the groups now and never saw this push.
                    RoutingTable t = server.routingTable();
                    throw PsDescriptor.wrongServer(t == null ? -1 : t.generation(), "the push's groups moved to "
                            + target.address() + "; this push was not acknowledged here: " + e.getMessage());
                }
                unknown |= !(unreachable instanceof PsException);
            }
            if (ended && ownedBy(server)) {
                return; // cancelled: the groups stay here, and so does the push
            }
            if (System.nanoTime() > deadline) {
                // Applied here, maybe not there: its rows go again with its id before any later copy of them.
                ifOutOfTime.run();
                throw new PsException(PsException.Code.UNCONFIRMED, "the push was applied but its " + what
                        + " could not be copied to the move's target " + target.address() + " in time: "
                        + unreachable.getMessage());
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                throw new PsException(PsException.Code.CLOSED, "interrupted while forwarding a push");
            }
        }
    }

    /**
     * One attempt's time: no attempt outlives the push's {@code deadline} (one to a target that
     * went away held the lock, and every push on the moving groups behind it, for a whole {@link
     * MoveCalls#CALL_MILLIS}).
     */
    private static long attemptMillis(long deadline) {
        return Math.min(MoveCalls.CALL_MILLIS, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
    }

    /** Whether {@code server} owns this move's groups in its current routing table. */
    private boolean ownedBy(PsServer server) {
        RoutingTable t = server.routingTable();
        int self = server.index();
        return t != null && self >= 0 && t.ownerOfGroup(firstGroup) == self;
    }
}
