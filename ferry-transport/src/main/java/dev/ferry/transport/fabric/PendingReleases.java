package dev.ferry.transport.fabric;

/**
 * The releases this side owes a link's peer for messages it sent by reference
 * ({@link FrameDescriptor#RNDV_SHARED}), waiting for a frame to ride: each eager frame to that
 * peer carries one in its cookie field, so that a request that follows the release of a
 * response (a client's next pull) gives the server its buffer back at no cost of its own. What
 * finds no frame goes, all of it in one RELEASES frame, once {@link #CAPACITY} are owed, or at
 * the credit review ({@link CreditBalancer}), within 10 ms. Nothing here is urgent: the sender's send
 * settled at delivery, and only its buffer waits. Token holder only.
 */
final class PendingReleases {

    /** Owed releases past which they go on their own frames. */
    static final int CAPACITY = 32;

    private final long[] cookies = new long[CAPACITY];
    private int head;
    private int size;

    /** Owes the release of {@code cookie}; false if full (the caller sends it on a frame of its own). */
    boolean add(long cookie) {
        if (size == CAPACITY) {
            return false;
        }
        cookies[(head + size) % CAPACITY] = cookie;
        size++;
        return true;
    }

    /** The oldest release owed, or 0 if none (cookies start at 1). */
    long peek() {
        return size == 0 ? 0 : cookies[head];
    }

    /** Takes the oldest release owed (after {@link #peek} found one and a frame carried it). */
    void remove() {
        head = (head + 1) % CAPACITY;
        size--;
    }

    int size() {
        return size;
    }

    /** Writes up to {@code max} releases owed into a RELEASES {@code frame}, oldest first, and owes them no more; the count. */
    int drainTo(java.lang.foreign.MemorySegment frame, int max) {
        int n = Math.min(size, max);
        for (int i = 0; i < n; i++) {
            FrameDescriptor.released(frame, i, cookies[(head + i) % CAPACITY]);
        }
        head = (head + n) % CAPACITY;
        size -= n;
        return n;
    }
}
