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
