package dev.ferry.ps;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Deletes a table's rows per its {@link Eviction}: those not updated within the TTL, and, over
 * {@link Eviction#trigger()} rows, the first ones in the policy's order down to
 * {@link Eviction#target()}.
 *
 * <p>Threads: one thread owns an evictor and all of its fields (the server's evictor thread,
 * {@link Evictors}, or a test's): the first to call {@link #runOnce} becomes its owner, and every
 * later call asserts it is the same. The rows it reads and deletes belong to the shards: it
 * takes each shard's lock for at most {@link #STEP_ROWS} row slots at a time, as a write for
 * the optimistic readers only when it deletes, and never holds a lock across a scan of the
 * table, so pulls and pushes wait at most one step.
 *
 * <p>Capacity, exactly: a pass copies every row's key (policy keys and id) into arrays it owns,
 * one step at a time; selects the key of the {@code k}-th first row ({@code k = rows - target})
 * with primitive sorts, no lock held; then deletes, step by step, up to {@code k} rows whose key
 * (read again under the lock) is at most that one. Without concurrent pushes this deletes exactly
 * the {@code k} first rows of the policy's order; a row pushed to meanwhile has a later key and
 * may survive (fewer are deleted, the next pass trims the rest); a row created meanwhile can take
 * the place of a collected one only under {@code LEAST_FREQUENTLY_USED} (no steps yet).
 * Memory: three {@code long}s per row while over the target (24 MiB for a million rows), kept for
 * the next pass.
 */
final class TableEvictor {

    /**
     * Row slots looked at per lock hold: 512 stamps and step counts (and at most 512 deletions),
     * about the work a push of a few hundred rows does under the lock.
     */
    static final int STEP_ROWS = 512;
    /** TTL scans run at most every {@code ttl / TTL_SCANS_PER_TTL}: a row outlives its TTL by at most that. */
    static final long TTL_SCANS_PER_TTL = 16;
    /** ... and at least once a second when the TTL is longer. */
    static final long MAX_TTL_SCAN_PERIOD_NANOS = 1_000_000_000L;

    private final SparseTable table;
    private final Eviction eviction;
    private final AtomicReference<Thread> owner = new AtomicReference<>();
    private final long ttlScanPeriod;
    private boolean scannedOnce;
    private long lastTtlScan;
    /** Per collected row: the policy's first key, its second key, the id; {@link #sorted} for selection. */
    private long[] first = new long[0];
    private long[] second = new long[0];
    private long[] ids = new long[0];
    private long[] sorted = new long[0];
    private int collected;
    private long passes;

    TableEvictor(SparseTable table) {
        this.table = table;
        this.eviction = table.config().eviction();
        this.ttlScanPeriod = Math.max(1, Math.min(MAX_TTL_SCAN_PERIOD_NANOS, eviction.ttlNanos() / TTL_SCANS_PER_TTL));
    }

    /**
     * One round: a TTL scan if one is due, then a capacity pass if the table is over its target.
     * Returns the rows deleted.
     *
     * @throws PsException {@code CLOSED} if the table was closed
     */
    int runOnce() {
        assert owned() : "an evictor runs on one thread: " + owner.get() + ", not " + Thread.currentThread();
        int deleted = 0;
        if (eviction.hasTtl()) {
            long now = table.now();
            if (!scannedOnce || now - lastTtlScan >= ttlScanPeriod) {
                scannedOnce = true;
                lastTtlScan = now;
                deleted += expire(now);
            }
        }
        if (eviction.hasCapacity() && table.rows() > eviction.trigger()) {
            deleted += trim();
        }
        return deleted;
    }

    /** Capacity passes run so far. */
    long passes() {
        return passes;
    }

    private boolean owned() {
        Thread me = Thread.currentThread();
        return owner.compareAndExchange(null, me) == null || owner.get() == me;
    }

    /** Deletes every row whose last update is more than the TTL before {@code now}. */
    private int expire(long now) {
        long ttl = eviction.ttlNanos();
        return deleteWhere(Integer.MAX_VALUE, true, (shard, row) -> now - shard.stamp(row) > ttl);
    }

    /** One capacity pass: collect, select, delete. */
    private int trim() {
        passes++;
        collect();
        long excess = table.rows() - eviction.target();
        int k = (int) Math.min(excess, collected);
        if (k <= 0) {
            return 0;
        }
        long[] cut = cutoff(k);
        return delete(cut[0], cut[1], cut[2], k);
    }

    private void collect() {
        collected = 0;
        boolean lfu = eviction.policy() == EvictionPolicy.LEAST_FREQUENTLY_USED;
        for (int s = 0; s < table.shardCount(); s++) {
            Shard shard = table.shard(s);
            for (int from = 0;; from += STEP_ROWS) {
                shard.lock.lock();
                try {
                    table.checkOpenLocked(shard);
                    int end = Math.min(shard.rows(), from + STEP_ROWS);
                    if (from >= end) {
                        break;
                    }
                    ensure(collected + (end - from));
                    for (int row = from; row < end; row++) {
                        if (!shard.live(row)) {
                            continue;
                        }
                        long id = shard.id(row);
                        long stamp = shard.stamp(row);
                        if (lfu) {
                            first[collected] = shard.steps(row);
                            second[collected] = stamp;
                        } else {
                            first[collected] = stamp;
                            second[collected] = 0;
                        }
                        ids[collected] = id;
                        collected++;
                    }
                } finally {
                    shard.lock.unlock();
                }
            }
        }
    }

    /**
     * The key of the {@code k}-th smallest collected (first, second, id) triple, so that exactly
     * {@code k} collected triples are at most it (ids are distinct): sort the first keys, take the
     * {@code k}-th, then among the rows tied on it the second keys, then the ids.
     */
    private long[] cutoff(int k) {
        int n = collected;
        System.arraycopy(first, 0, sorted, 0, n);
        Arrays.sort(sorted, 0, n);
        long a = sorted[k - 1];
        int need = k - lowerBound(sorted, n, a);
        int m = 0;
        for (int i = 0; i < n; i++) {
            if (first[i] == a) {
                sorted[m++] = second[i];
            }
        }
        Arrays.sort(sorted, 0, m);
        long b = sorted[need - 1];
        need -= lowerBound(sorted, m, b);
        m = 0;
        for (int i = 0; i < n; i++) {
            if (first[i] == a && second[i] == b) {
                sorted[m++] = ids[i];
            }
        }
        Arrays.sort(sorted, 0, m);
        return new long[] {a, b, sorted[need - 1]};
    }

    /** Elements of {@code sorted[0, n)} below {@code value}. */
    private static int lowerBound(long[] sorted, int n, long value) {
        int lo = 0;
        int hi = n;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (sorted[mid] < value) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** Deletes up to {@code k} rows whose (first, second, id) key is at most (a, b, c), read under the locks. */
    private int delete(long a, long b, long c, int k) {
        boolean lfu = eviction.policy() == EvictionPolicy.LEAST_FREQUENTLY_USED;
        return deleteWhere(k, false, (shard, row) -> {
            long stamp = shard.stamp(row);
            long x = lfu ? shard.steps(row) : stamp;
            long y = lfu ? stamp : 0;
            if (x != a || y != b) {
                return x < a || (x == a && y < b);
            }
            return shard.id(row) <= c;
        });
    }

    /** Which live rows a pass deletes; read under the shard's lock. */
    @FunctionalInterface
    private interface Doomed {
        boolean test(Shard shard, int row);
    }

    /**
     * Deletes up to {@code limit} live rows that {@code doomed} picks, shard by shard, in steps
     * of {@value #STEP_ROWS} row slots under the shard's lock (never across a whole shard), and
     * counts them as evicted by TTL ({@code ttl}) or by capacity.
     */
    private int deleteWhere(int limit, boolean ttl, Doomed doomed) {
        int deleted = 0;
        for (int s = 0; s < table.shardCount() && deleted < limit; s++) {
            Shard shard = table.shard(s);
            for (int from = 0; deleted < limit; from += STEP_ROWS) {
                int n = 0;
                shard.lock.lock();
                try {
                    table.checkOpenLocked(shard);
                    int end = Math.min(shard.rows(), from + STEP_ROWS);
                    if (from >= end) {
                        break;
                    }
                    boolean writing = false;
                    try {
                        for (int row = from; row < end && deleted + n < limit; row++) {
                            if (!shard.live(row) || !doomed.test(shard, row)) {
                                continue;
                            }
                            if (!writing) {
                                shard.beginWrite();
                                writing = true;
                            }
                            long id = shard.id(row);
                            long steps = shard.steps(row);
                            shard.remove(row);
                            table.removed(id, steps);
                            n++;
                        }
                    } finally {
                        if (writing) {
                            shard.endWrite();
                        }
                    }
                } finally {
                    shard.lock.unlock();
                }
                if (n > 0) {
                    table.evicted(n, ttl);
                    deleted += n;
                }
            }
        }
        return deleted;
    }

    private void ensure(int size) {
        if (size > first.length) {
            int grown = Math.max(size, first.length + (first.length >> 1) + 1024);
            first = Arrays.copyOf(first, grown);
            second = Arrays.copyOf(second, grown);
            ids = Arrays.copyOf(ids, grown);
            sorted = new long[grown];
        }
    }
}
