package dev.ferry.ps.net;

import java.util.Arrays;

/**
 * The dedupe ids of the pushes last applied to each slot group, so that a client's retry of a
 * push (same dedupe id) that was applied already, here or on a primary that replicated it here,
 * is acknowledged without being applied again. Bounded: {@link #PER_GROUP} ids per group, the
 * oldest forgotten first; a retry comes within a failover (seconds), far fewer pushes than that
 * per group at the rates measured.
 *
 * <p>Kept per group, not per server, because a push is replicated per group: a server that holds
 * a push's rows of one group may be asked, after later moves, to apply the same push's rows of
 * another group it never had. Thread-safe: each group's ring is guarded by itself (the primary
 * also holds the group's push lock around it, a backup takes one replication at a time per group).
 */
final class DedupeWindow {

    /** Ids kept per group. */
    static final int PER_GROUP = 256;

    /** 2 MiB per server: allocated once, never on a push. */
    private final long[][] rings = new long[RoutingTable.GROUPS][PER_GROUP];
    private final int[] next = new int[RoutingTable.GROUPS];

    /** Whether push {@code dedupe} (not 0) was applied to {@code group}. */
    boolean contains(int group, long dedupe) {
        if (dedupe == 0) {
            return false;
        }
        long[] ring = ring(group);
        synchronized (ring) {
            for (long d : ring) {
                if (d == dedupe) {
                    return true;
                }
            }
            return false;
        }
    }

    /** Records that push {@code dedupe} was applied to {@code group} (0 and repeats are ignored). */
    void record(int group, long dedupe) {
        if (dedupe == 0) {
            return;
        }
        long[] ring = ring(group);
        synchronized (ring) {
            for (long d : ring) {
                if (d == dedupe) {
                    return;
                }
            }
            ring[next[group]] = dedupe;
            next[group] = (next[group] + 1) % PER_GROUP;
        }
    }

    /**
     * {@link #record} of an id the caller knows {@code group} does not hold (it checked, and
     * nothing records on the group meanwhile): without the scan for a repeat.
     */
    void recordAbsent(int group, long dedupe) {
        if (dedupe == 0) {
            return;
        }
        long[] ring = ring(group);
        synchronized (ring) {
            ring[next[group]] = dedupe;
            next[group] = (next[group] + 1) % PER_GROUP;
        }
    }

    /**
     * Records ids of pushes applied to {@code group} before every id recorded so far (a move's
     * or copy's {@code MOVE_DEDUPE}, which reaches the target after the first forwarded pushes):
     * they go in as the oldest, so that when the window is full they, not the newer forwarded
     * ids, are the ones forgotten. Repeats and 0 are ignored.
     */
    void recordOlder(int group, long[] older, int count) {
        long[] ring = ring(group);
        synchronized (ring) {
            long[] merged = new long[PER_GROUP];
            int kept = 0;
            long[] newer = new long[PER_GROUP];
            int n = 0;
            for (int i = 0; i < PER_GROUP; i++) {
                long d = ring[(next[group] + i) % PER_GROUP];
                if (d != 0) {
                    newer[n++] = d;
                }
            }
            // The newest PER_GROUP of: older (in order), then the ids already here.
            int room = PER_GROUP - n;
            int from = Math.max(0, count - room);
            for (int i = from; i < count; i++) {
                long d = older[i];
                if (d != 0 && !contains(newer, n, d) && !contains(merged, kept, d)) {
                    merged[kept++] = d;
                }
            }
            System.arraycopy(newer, 0, merged, kept, n);
            kept += n;
            Arrays.fill(ring, 0);
            System.arraycopy(merged, 0, ring, 0, kept);
            next[group] = kept % PER_GROUP;
        }
    }

    private static boolean contains(long[] ids, int n, long d) {
        for (int i = 0; i < n; i++) {
            if (ids[i] == d) {
                return true;
            }
        }
        return false;
    }

    /** The ids recorded for {@code group}, oldest first (for a move or copy of the group). */
    long[] ids(int group) {
        long[] ring = ring(group);
        synchronized (ring) {
            long[] out = new long[PER_GROUP];
            int n = 0;
            for (int i = 0; i < PER_GROUP; i++) {
                long d = ring[(next[group] + i) % PER_GROUP];
                if (d != 0) {
                    out[n++] = d;
                }
            }
            return Arrays.copyOf(out, n);
        }
    }

    /** Forgets every id of {@code group} (its rows were reset: a new copy starts). */
    void clear(int group) {
        long[] ring = ring(group);
        synchronized (ring) {
            Arrays.fill(ring, 0);
        }
    }

    private long[] ring(int group) {
        return rings[group];
    }
}
