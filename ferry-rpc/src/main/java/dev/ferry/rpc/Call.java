package dev.ferry.rpc;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One call in flight: what it sends, its deadline, the session it went out on, and the future
 * the caller holds. The caller, the transport thread that delivers the reply and the timer
 * thread that sweeps deadlines all see it; whoever removes it from its channel's
 * {@link PendingCalls} completes it, so it completes exactly once.
 *
 * <p>A call record is not pooled: its future is the caller's, who may hold it (and its call)
 * long after the call completed, and a late reply is matched by call id, which is never reused.
 */
final class Call {

    private static final VarHandle SENT_ON;

    static {
        try {
            SENT_ON = MethodHandles.lookup().findVarHandle(Call.class, "sentOn", Session.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final RpcChannel channel;
    final long id;
    final RpcMethod method;
    final int length;
    final RequestWriter writer;
    final long deadlineMillis;
    final long deadlineNanos;
    final long startNanos;
    final Future future;
    /** The group the caller waits on with other calls, or null. */
    final CallGroup group;
    /** The session the call was last sent on; null before. Set with {@link #sentOn(Session, Session)}. */
    @SuppressWarnings("unused")
    private volatile Session sentOn;
    /** The epoch of the server the call was first sent to; 0 before. */
    volatile long firstEpoch;

    Call(RpcChannel channel, long id, RpcMethod method, int length, RequestWriter writer, long deadlineMillis,
            CallGroup group) {
        this.channel = channel;
        this.id = id;
        this.method = method;
        this.length = length;
        this.writer = writer;
        this.deadlineMillis = deadlineMillis;
        this.startNanos = System.nanoTime();
        this.deadlineNanos = startNanos + TimeUnit.MILLISECONDS.toNanos(deadlineMillis);
        this.group = group;
        this.future = new Future(this);
    }

    /** The session the call was last sent on, or null. */
    Session sentOn() {
        return sentOn;
    }

    /** Moves the call from session {@code expected} to {@code next}; false if another thread moved it first. */
    boolean sentOn(Session expected, Session next) {
        return SENT_ON.compareAndSet(this, expected, next);
    }

    /** Whether the deadline has passed at {@code nowNanos}. */
    boolean expiredAt(long nowNanos) {
        return nowNanos - deadlineNanos >= 0;
    }

    /** A call's future; cancelling it abandons the call. Its completion, however made, counts in its group. */
    static final class Future extends CompletableFuture<RpcResponse> {
        private static final VarHandle COUNTED;

        static {
            try {
                COUNTED = MethodHandles.lookup().findVarHandle(Future.class, "counted", boolean.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        private final Call call;
        /** Set by the completion that counted in the group ({@code cancel} says true again once cancelled). */
        @SuppressWarnings("unused")
        private volatile boolean counted;

        Future(Call call) {
            this.call = call;
        }

        @Override
        public boolean complete(RpcResponse value) {
            return counted(super.complete(value));
        }

        @Override
        public boolean completeExceptionally(Throwable failure) {
            return counted(super.completeExceptionally(failure));
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            boolean done = counted(super.cancel(mayInterruptIfRunning));
            if (done) {
                call.channel.cancelled(call);
            }
            return done;
        }

        private boolean counted(boolean done) {
            if (done && call.group != null && COUNTED.compareAndSet(this, false, true)) {
                call.group.completed();
            }
            return done;
        }
    }
}
