package dev.ferry.rpc;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReferenceArray;

/**
 * The calls of one channel not yet completed, by call id: the only way to a call once it is
 * sent. Removing a call is the right to complete it ({@link #remove(Call)}, {@link #remove(long)}):
 * a reply, an error, the deadline sweep, a cancel or a failure race for it and one wins.
 *
 * <p>A call sits in the slot its id selects ({@code id & (SLOTS - 1)}): entering and leaving
 * it is one compare-and-set, with no boxed key and no map entry per call. Ids come from the
 * client's counter, shared by its channels, so a slot is taken only when a call of this channel
 * is still pending {@code SLOTS} ids later; such a call goes to the overflow map instead, which
 * is looked at only while it holds anything.
 *
 * <p>Thread-safe. Call ids come from the client's counter and enter the table under one lock,
 * so the acknowledgement watermark ({@link #watermark()}) never passes a call still pending.
 */
final class PendingCalls {

    /** Slots per channel: a power of two. */
    static final int SLOTS = 1024;
    private static final int MASK = SLOTS - 1;

    private final AtomicReferenceArray<Call> slots = new AtomicReferenceArray<>(SLOTS);
    /** Calls whose slot was taken when they were opened; rare. */
    private final ConcurrentHashMap<Long, Call> overflow = new ConcurrentHashMap<>();
    private final AtomicLong nextCallId;
    /** Held while a call takes its id and enters the table, so the watermark never passes a call. */
    private final Object idLock = new Object();
    /**
     * No pending call has a lower id: the watermark last found (ids only grow, so any watermark
     * found stays a lower bound, whichever thread found it last). Scans start here, so that they
     * visit the slots of the ids issued since, not all of them.
     */
    private volatile long floor;

    PendingCalls(AtomicLong nextCallId) {
        this.nextCallId = nextCallId;
        this.floor = nextCallId.get();
    }

    /** A new call with the next id, pending from now on. */
    Call open(RpcChannel channel, RpcMethod method, int length, RequestWriter writer, long deadlineMillis,
            CallGroup group) {
        synchronized (idLock) {
            Call call = new Call(channel, nextCallId.getAndIncrement(), method, length, writer, deadlineMillis, group);
            if (!slots.compareAndSet(slot(call.id), null, call)) {
                overflow.put(call.id, call);
            }
            return call;
        }
    }

    /** The pending call with {@code id}, removed: the caller completes it. Null if none. */
    Call remove(long id) {
        int slot = slot(id);
        Call call = slots.get(slot);
        if (call != null && call.id == id) {
            // A failed exchange means another thread removed it first: that thread completes it.
            return slots.compareAndSet(slot, call, null) ? call : null;
        }
        return overflow.isEmpty() ? null : overflow.remove(id);
    }

    /** Removes {@code call} if it is still pending; true if this caller now completes it. */
    boolean remove(Call call) {
        return slots.compareAndSet(slot(call.id), call, null)
                || !overflow.isEmpty() && overflow.remove(call.id, call);
    }

    /** The pending call with {@code id}, left pending; null if none. */
    Call get(long id) {
        Call call = slots.get(slot(id));
        if (call != null && call.id == id) {
            return call;
        }
        return overflow.isEmpty() ? null : overflow.get(id);
    }

    /** Calls pending now; a scan of the slots, for diagnostics. */
    int size() {
        int n = overflow.size();
        for (int i = 0; i < SLOTS; i++) {
            if (slots.get(i) != null) {
                n++;
            }
        }
        return n;
    }

    /** Calls in the overflow map now; for tests. */
    int overflowed() {
        return overflow.size();
    }

    /** The pending calls now, in no order. */
    List<Call> snapshot() {
        List<Call> all = new ArrayList<>(overflow.values());
        for (int i = 0; i < SLOTS; i++) {
            Call call = slots.get(i);
            if (call != null) {
                all.add(call);
            }
        }
        return all;
    }

    /**
     * The lowest call id still pending, or the next id if none: every id below it is done.
     * On the timer thread, and on the thread that asks for a channel.
     */
    long watermark() {
        long next = nextId();
        long from = floor;
        long min = next;
        for (int k = 0, n = slotsToScan(from, next); k < n; k++) {
            Call call = slots.get(slot(from + k));
            if (call != null && call.id < min) {
                min = call.id;
            }
        }
        if (!overflow.isEmpty()) {
            for (Long id : overflow.keySet()) {
                min = Math.min(min, id);
            }
        }
        floor = min;
        return min;
    }

    /**
     * Expires (through {@code channel}) every call whose deadline passed at {@code nowNanos}, and
     * returns the earliest deadline among the others, or {@code nowNanos + horizon} if that is
     * earlier. Timer thread.
     */
    long sweep(RpcChannel channel, long nowNanos, long horizonNanos) {
        long earliest = nowNanos + horizonNanos;
        long from = floor;
        for (int k = 0, n = slotsToScan(from, nextId()); k < n; k++) {
            Call call = slots.get(slot(from + k));
            if (call != null) {
                earliest = sweep(channel, call, nowNanos, earliest);
            }
        }
        if (!overflow.isEmpty()) {
            for (Call call : overflow.values()) {
                earliest = sweep(channel, call, nowNanos, earliest);
            }
        }
        return earliest;
    }

    /**
     * How many slots, from {@code slot(from)} on, can hold a pending call: those of the ids from
     * the floor to the next id, or all of them where more ids than slots were issued since. (A
     * call opened meanwhile may be met there too; it is pending, so that is no harm.)
     */
    private static int slotsToScan(long from, long next) {
        return (int) Math.min(next - from, SLOTS);
    }

    private static long sweep(RpcChannel channel, Call call, long nowNanos, long earliest) {
        if (call.expiredAt(nowNanos)) {
            channel.expire(call);
            return earliest;
        }
        return call.deadlineNanos - earliest < 0 ? call.deadlineNanos : earliest;
    }

    /** The id the next call will take: every call opened before has a lower one and is in the table. */
    private long nextId() {
        synchronized (idLock) {
            return nextCallId.get();
        }
    }

    private static int slot(long id) {
        return (int) id & MASK;
    }
}
