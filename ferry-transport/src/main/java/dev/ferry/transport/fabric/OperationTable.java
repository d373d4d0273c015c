package dev.ferry.transport.fabric;

import java.util.ArrayDeque;

import dev.ferry.fabric.OperationContexts;

/**
 * The operations posted to libfabric and not yet completed, one slot each: the slot's context
 * is what the provider hands back in the completion, and the slot says what the operation was
 * (its kind), on what ({@code target}: a buffer, a frame, a message being pulled), on which link
 * and for how many bytes. Progress thread only; allocation-free but for quarantine.
 *
 * <p>The slots of each link are chained in a list of their own, so that a link's teardown frees
 * its operations without scanning the whole table. An operation dropped with its endpoint may
 * still complete (a completion may already be queued), so its slot is {@link #DEAD} for
 * {@link #QUARANTINE_NANOS} before it is used again.
 */
final class OperationTable implements AutoCloseable {

    static final byte FREE = 0;
    static final byte RECV = 1;
    static final byte SEND_MESSAGE = 2;
    static final byte SEND_CONTROL = 3;
    static final byte READ = 4;
    /** The endpoint was closed under the operation: its completion, if any comes, is ignored. */
    static final byte DEAD = 5;
    /**
     * A read of a torn-down link whose endpoint stays open until the provider ends the read
     * ({@link LinkTeardown}): no longer counted by the puller, its target freed once it ends.
     */
    static final byte ORPHANED_READ = 6;
    /**
     * An eager send of a torn-down link on a shared endpoint, failed at the teardown: the provider
     * may still read its buffer, which goes back when the send completes (or at the shutdown).
     */
    static final byte ORPHANED_SEND = 7;
    /** How long a dropped operation's slot stays out of use: far longer than a completion lags. */
    private static final long QUARANTINE_NANOS = 5_000_000_000L;
    private static final int NONE = -1;

    /** What a teardown does with each operation its link still had. */
    interface Dropped {
        void drop(byte kind, Object target, Link link, long bytes);
    }

    private final OperationContexts contexts;
    private final byte[] kind;
    private final Object[] target;
    private final Link[] link;
    private final long[] bytes;
    /** The per-link lists: neighbours of each slot in its link's list. */
    private final int[] next;
    private final int[] previous;
    private final int[] free;
    private int freeCount;
    /** Slots of dropped operations, and when they may be reused. */
    private final ArrayDeque<long[]> quarantine = new ArrayDeque<>();

    OperationTable(int slots) {
        this.contexts = new OperationContexts(slots);
        this.kind = new byte[slots];
        this.target = new Object[slots];
        this.link = new Link[slots];
        this.bytes = new long[slots];
        this.next = new int[slots];
        this.previous = new int[slots];
        this.free = new int[slots];
        for (int i = slots - 1; i >= 0; i--) {
            free[freeCount++] = i;
        }
    }

    /** A free slot for an operation about to be posted, or -1 if none is left. */
    int take() {
        return freeCount == 0 ? NONE : free[--freeCount];
    }

    /** The context to post with the operation of {@code slot}. */
    long context(int slot) {
        return contexts.context(slot);
    }

    /** The slot of a completion's context, or -1 if it is none of ours. */
    int slot(long context) {
        return contexts.slot(context);
    }

    /** The operation of {@code slot} was posted: records what it was ({@code on} null for none). */
    void posted(int slot, byte what, Object on, Link onLink, long length) {
        kind[slot] = what;
        target[slot] = on;
        link[slot] = onLink;
        bytes[slot] = length;
        if (onLink != null) {
            int head = onLink.firstOperation;
            next[slot] = head;
            previous[slot] = NONE;
            if (head != NONE) {
                previous[head] = slot;
            }
            onLink.firstOperation = slot;
        }
    }

    byte kind(int slot) {
        return kind[slot];
    }

    Object target(int slot) {
        return target[slot];
    }

    Link link(int slot) {
        return link[slot];
    }

    long bytes(int slot) {
        return bytes[slot];
    }

    /** The operation completed (or was never posted): its slot is free again. */
    void release(int slot) {
        unlink(slot);
        kind[slot] = FREE;
        target[slot] = null;
        bytes[slot] = 0;
        free[freeCount++] = slot;
    }

    private void unlink(int slot) {
        Link of = link[slot];
        if (of == null) {
            return;
        }
        int after = next[slot];
        int before = previous[slot];
        if (before == NONE) {
            of.firstOperation = after;
        } else {
            next[before] = after;
        }
        if (after != NONE) {
            previous[after] = before;
        }
        link[slot] = null;
    }

    /**
     * {@code of}'s endpoint was closed: nothing of it completes any more. Each of its operations
     * goes to {@code dropped}, and its slot to quarantine.
     */
    void dropAll(Link of, Dropped dropped) {
        long until = System.nanoTime() + QUARANTINE_NANOS;
        for (int slot = of.firstOperation; slot != NONE; slot = of.firstOperation) {
            byte was = kind[slot];
            Object on = target[slot];
            long length = bytes[slot];
            unlink(slot);
            kind[slot] = DEAD;
            target[slot] = null;
            quarantine.add(new long[] {slot, until});
            dropped.drop(was, on, of, length);
        }
    }

    /**
     * {@code of} was torn down while its endpoint stays open: each of its reads becomes
     * {@link #ORPHANED_READ} and goes to {@code orphaned}. Returns the reads {@code of} has in
     * flight, orphaned before or now.
     */
    int orphanReads(Link of, Dropped orphaned) {
        int reads = 0;
        for (int slot = of.firstOperation; slot != NONE; slot = next[slot]) {
            if (kind[slot] == READ) {
                kind[slot] = ORPHANED_READ;
                orphaned.drop(READ, target[slot], of, bytes[slot]);
            }
            if (kind[slot] == ORPHANED_READ) {
                reads++;
            }
        }
        return reads;
    }

    /**
     * {@code of} was torn down on an endpoint that stays open for other links: each of its
     * message sends becomes {@link #ORPHANED_SEND} and goes to {@code orphaned}.
     */
    void orphanSends(Link of, Dropped orphaned) {
        for (int slot = of.firstOperation; slot != NONE; slot = next[slot]) {
            if (kind[slot] == SEND_MESSAGE) {
                kind[slot] = ORPHANED_SEND;
                orphaned.drop(SEND_MESSAGE, target[slot], of, bytes[slot]);
            }
        }
    }

    /** Whether {@code of} has a read in flight, orphaned or not. */
    boolean readsInFlight(Link of) {
        for (int slot = of.firstOperation; slot != NONE; slot = next[slot]) {
            if (kind[slot] == READ || kind[slot] == ORPHANED_READ) {
                return true;
            }
        }
        return false;
    }

    boolean hasQuarantined() {
        return !quarantine.isEmpty();
    }

    /** Frees the quarantined slots whose time is up. */
    void releaseQuarantined(long now) {
        while (!quarantine.isEmpty() && quarantine.peek()[1] - now < 0) {
            int slot = (int) quarantine.poll()[0];
            kind[slot] = FREE;
            bytes[slot] = 0;
            free[freeCount++] = slot;
        }
    }

    @Override
    public void close() {
        contexts.close();
    }
}
