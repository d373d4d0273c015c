package dev.ferry.rpc;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The calls of one channel not yet completed, by call id: the only way to a call once it is
 * sent. Removing a call is the right to complete it ({@link #remove(Call)}, {@link #remove(long)}):
 * a reply, an error, the deadline sweep, a cancel or a failure race for it and one wins.
 *
 * <p>Thread-safe. Call ids come from the client's counter and enter the table under one lock,
 * so the acknowledgement watermark ({@link #watermark()}) never passes a call still pending.
 */
final class PendingCalls {

    private final ConcurrentHashMap<Long, Call> calls = new ConcurrentHashMap<>();
    private final AtomicLong nextCallId;
    /** Held while a call takes its id and enters {@link #calls}, so the watermark never passes a call. */
    private final Object idLock = new Object();

    PendingCalls(AtomicLong nextCallId) {
        this.nextCallId = nextCallId;
    }

    /** A new call with the next id, pending from now on. */
    Call open(RpcChannel channel, RpcMethod method, int length, RequestWriter writer, long deadlineMillis) {
        synchronized (idLock) {
            Call call = new Call(channel, nextCallId.getAndIncrement(), method, length, writer, deadlineMillis);
            calls.put(call.id, call);
            return call;
        }
    }

    /** The pending call with {@code id}, removed: the caller completes it. Null if none. */
    Call remove(long id) {
        return calls.remove(id);
    }

    /** Removes {@code call} if it is still pending; true if this caller now completes it. */
    boolean remove(Call call) {
        return calls.remove(call.id, call);
    }

    /** The pending call with {@code id}, left pending; null if none. */
    Call get(long id) {
        return calls.get(id);
    }

    int size() {
        return calls.size();
    }

    /** The pending calls now, in no order. */
    List<Call> snapshot() {
        return new ArrayList<>(calls.values());
    }

    /** The lowest call id still pending, or the next id if none: every id below it is done. */
    long watermark() {
        long next;
        synchronized (idLock) {
            next = nextCallId.get();
        }
        long min = next;
        for (Long id : calls.keySet()) {
            if (id < min) {
                min = id;
            }
        }
        return min;
    }

    /**
     * Expires (through {@code channel}) every call whose deadline passed at {@code nowNanos}, and
     * returns the earliest deadline among the others, or {@code nowNanos + horizon} if that is
     * earlier. On the timer thread.
     */
    long sweep(RpcChannel channel, long nowNanos, long horizonNanos) {
        long earliest = nowNanos + horizonNanos;
        for (Call call : calls.values()) {
            if (call.expiredAt(nowNanos)) {
                channel.expire(call);
            } else if (call.deadlineNanos - earliest < 0) {
                earliest = call.deadlineNanos;
            }
        }
        return earliest;
    }
}
