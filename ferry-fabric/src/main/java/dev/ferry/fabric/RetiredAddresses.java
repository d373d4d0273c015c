package dev.ferry.fabric;

import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Iterator;

/**
 * Peers' addresses a shm session no longer uses, left in its address vector for a grace period
 * before {@code fi_av_remove}.
 *
 * <p>libfabric 1.17's shm numbers peers by a slot in each side's region. Its {@code fi_av_remove}
 * frees the slot before telling the peer, so the peer's record of it is never cleared (upstream
 * fixed the order in commit d70376d, released in 2.0), and leaves this side's own record of
 * the peer's numbering in place;
 * its allocator then hands the slot just freed to the next address inserted. So a departing
 * peer's frames still in flight, or this side's first frames to the next peer, carry the old
 * numbering, and the receiver reports them as coming from another peer ({@code FI_SOURCE}), or
 * touches a region that is no longer mapped. Keeping the slot taken for a while lets the
 * departed peer's last frames find it and makes the allocator move on to other slots; the
 * provider then reuses a slot only after going round all of them.
 *
 * <p>Thread-safe (set-up calls, not the data path).
 */
final class RetiredAddresses {

    /** How long a retired address stays in the address vector. */
    static final long GRACE_NANOS = 2_000_000_000L;

    private final AddressVector av;
    private final int capacity;
    /** The addresses waiting, oldest first. */
    private final ArrayDeque<Retired> retired = new ArrayDeque<>();

    private record Retired(long handle, long sinceNanos, byte[] address) { }

    /** Retires addresses of {@code av}, which holds {@code capacity} entries. */
    RetiredAddresses(AddressVector av, int capacity) {
        this.av = av;
        this.capacity = capacity;
    }

    /**
     * {@code handle}, inserted for {@code address}, is no longer used: it leaves the address
     * vector at a {@link #purge} once the grace period has passed.
     */
    synchronized void retire(long handle, byte[] address, long nowNanos) {
        retired.addLast(new Retired(handle, nowNanos, address));
    }

    /**
     * Takes back the retired handle of {@code address}, or returns -1. A peer that comes back
     * with the same address must get its handle back rather than a second insertion: shm counts
     * the insertions of an address, yet one removal frees its slot.
     */
    synchronized long revive(byte[] address) {
        for (Iterator<Retired> it = retired.iterator(); it.hasNext(); ) {
            Retired r = it.next();
            if (Arrays.equals(r.address, address)) {
                it.remove();
                return r.handle;
            }
        }
        return -1;
    }

    /**
     * Removes the addresses retired at least the grace period ago. Call it right after an
     * insertion: shm's allocator hands out next the slot after the one it filled last, so a slot
     * freed then is reused only once the allocator has gone round all of them.
     */
    synchronized void purge(long nowNanos) {
        while (!retired.isEmpty() && nowNanos - retired.peekFirst().sinceNanos >= GRACE_NANOS) {
            remove(retired.pollFirst().handle);
        }
    }

    /**
     * Before an insertion: removes the oldest retired addresses, whatever their age, while
     * {@code live} addresses in use and the retired ones leave no room for one more.
     */
    synchronized void makeRoom(int live) {
        while (!retired.isEmpty() && live + retired.size() >= capacity) {
            remove(retired.pollFirst().handle);
        }
    }

    private void remove(long handle) {
        if (!av.isClosed()) {
            av.remove(handle);
        }
    }

    /** How many addresses wait to be removed. */
    synchronized int size() {
        return retired.size();
    }
}
