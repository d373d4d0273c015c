package dev.ferry.ps;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntPredicate;

/**
 * Which rows of a training server changed when, for the live export to serving servers: per
 * sparse table, the id of every row it stores mapped to the <em>tick</em> of its last change. Not a
 * copy of the rows: 16 bytes per id, at most one entry per stored row (and per id evicted since,
 * until an export finds it gone: {@link #forget}).
 *
 * <p>Ticks. Changes are stamped with the open tick; {@link #seal} closes it and returns it, and
 * every change after the seal returns is stamped with a later tick. A change is stamped after
 * the row holds it ({@link SparseTable#onChange}), so once {@code seal()} returned {@code u},
 * every row stamped with a tick up to {@code u} already holds the values it was stamped for: a
 * follower that copies the rows stamped in {@code (s, u]} after the seal, and those stamped in
 * {@code (u, u']} after the next one, misses no change (a row read later than its stamp only
 * carries newer values, which the merge by step count accepts).
 *
 * <p>Recording starts with the first {@link #seal} (the first follower's first poll): only then
 * are the tables' listeners installed, so a server that nobody follows pays nothing on its
 * pushes. Every table is picked up by the seal after it appears, with every row it stores then
 * (stamped with the open tick): a follower asking from tick 0 gets every row of the server.
 *
 * <p>Thread safety: marks come from any writing thread, each under one of 64 stripe locks; seals
 * are serialised; queries take one stripe lock at a time.
 */
public final class ExportLog {

    private static final int STRIPES = 64;

    private final ParameterServer ps;
    private final long id;
    /** The tick changes are stamped with now; read under a stripe lock. */
    private volatile long openTick = 1;
    private final Map<String, Touched> tables = new ConcurrentHashMap<>();

    /** A log of {@code ps}'s changes, idle until the first {@link #seal}. */
    public ExportLog(ParameterServer ps) {
        this.ps = java.util.Objects.requireNonNull(ps, "ps");
        long random;
        do {
            random = ThreadLocalRandom.current().nextLong();
        } while (random == 0);
        this.id = random;
    }

    /**
     * This log's identity, random per process: a follower that sees another one talks to a
     * restarted server, whose ticks mean nothing to its cursor.
     */
    public long id() {
        return id;
    }

    /** The last sealed tick (0 before the first seal). */
    public long sealed() {
        return openTick - 1;
    }

    /**
     * Picks up the sparse tables not recorded yet (their listeners, then every row they store),
     * then closes the open tick and returns it: every change stamped up to it is in its row now.
     */
    public synchronized long seal() {
        for (TableStats stats : ps.stats()) {
            if (tables.containsKey(stats.name())) {
                continue;
            }
            SparseTable table;
            try {
                table = ps.table(stats.name());
            } catch (PsException dense) {
                continue; // dense tensors are not exported
            }
            Touched touched = new Touched();
            table.onChange(touched::mark);
            // After the listener: a row changed meanwhile is in the scan or marked by it.
            RowTransfer.export(table, x -> true, 1 << 20, rows -> {
                long rowBytes = RowTransfer.rowBytes(table);
                for (long at = 0; at < rows.byteSize(); at += rowBytes) {
                    touched.mark(RowTransfer.idOf(rows, at));
                }
            });
            tables.put(stats.name(), touched);
        }
        long sealing = openTick;
        openTick = sealing + 1;
        // A mark that read the sealed tick holds its stripe's lock until it wrote: wait for each.
        for (Touched t : tables.values()) {
            for (Stripe s : t.stripes) {
                s.lock.lock();
                s.lock.unlock();
            }
        }
        return sealing;
    }

    /** Whether {@code table} is recorded (picked up by a seal). */
    public boolean records(String table) {
        return tables.containsKey(table);
    }

    /**
     * The ids of {@code table} stamped in {@code (since, upTo]}, greater than {@code afterId}
     * unless {@code first}, whose slot {@code slots} accepts: the smallest {@code max + 1} of them,
     * ascending (one more than asked, so that the caller knows whether more follow).
     */
    public long[] changed(String table, long since, long upTo, long afterId, boolean first, IntPredicate slots,
            int max) {
        Touched t = tables.get(table);
        if (t == null) {
            return new long[0];
        }
        long[] found = new long[16];
        int n = 0;
        for (Stripe s : t.stripes) {
            s.lock.lock();
            try {
                for (int i = 0; i < s.capacity(); i++) {
                    long tick = s.tick(i);
                    long key = s.key(i);
                    if (tick > since && tick <= upTo && (first || key > afterId) && slots.test(Slots.slotOf(key))) {
                        if (n == found.length) {
                            found = Arrays.copyOf(found, n * 2);
                        }
                        found[n++] = key;
                    }
                }
            } finally {
                s.lock.unlock();
            }
        }
        Arrays.sort(found, 0, n);
        return Arrays.copyOf(found, Math.min(n, max + 1));
    }

    /**
     * Drops {@code id} of {@code table} if its stamp is at most {@code upTo}: an export found its
     * row gone (evicted). A row made again since is stamped later and stays.
     */
    public void forget(String table, long id, long upTo) {
        Touched t = tables.get(table);
        if (t != null) {
            t.forget(id, upTo);
        }
    }

    /** Ids recorded over all tables. */
    public long entries() {
        long n = 0;
        for (Touched t : tables.values()) {
            for (Stripe s : t.stripes) {
                s.lock.lock();
                try {
                    n += s.size;
                } finally {
                    s.lock.unlock();
                }
            }
        }
        return n;
    }

    /** Heap bytes of the record. */
    public long bytes() {
        long n = 0;
        for (Touched t : tables.values()) {
            for (Stripe s : t.stripes) {
                s.lock.lock();
                try {
                    n += 8L * s.entries.length;
                } finally {
                    s.lock.unlock();
                }
            }
        }
        return n;
    }

    /** One table's stamps, in stripes by the id's hash. */
    private final class Touched {
        final Stripe[] stripes = new Stripe[STRIPES];

        Touched() {
            for (int i = 0; i < STRIPES; i++) {
                stripes[i] = new Stripe();
            }
        }

        void mark(long id) {
            long hash = Slots.mix(id);
            Stripe s = stripes[(int) (hash & (STRIPES - 1))];
            s.lock.lock();
            try {
                s.put(id, hash >>> 6, openTick);
            } finally {
                s.lock.unlock();
            }
        }

        void forget(long id, long upTo) {
            long hash = Slots.mix(id);
            Stripe s = stripes[(int) (hash & (STRIPES - 1))];
            s.lock.lock();
            try {
                s.remove(id, hash >>> 6, upTo);
            } finally {
                s.lock.unlock();
            }
        }
    }

    /**
     * An open-addressing map of id to tick with linear probing, guarded by its lock; tick 0 marks
     * a free slot. Id and tick sit side by side ({@code entries[2i]}, {@code entries[2i + 1]}), so
     * a mark touches one cache line. Grows by doubling at half full; deletion shifts the following
     * run back.
     */
    private static final class Stripe {
        final ReentrantLock lock = new ReentrantLock();
        /** Slots of id, tick. */
        long[] entries = new long[2 * 64];
        int size;

        int capacity() {
            return entries.length >>> 1;
        }

        long key(int i) {
            return entries[2 * i];
        }

        long tick(int i) {
            return entries[2 * i + 1];
        }

        void put(long id, long hash, long tick) {
            long[] e = entries;
            int mask = (e.length >>> 1) - 1;
            for (int i = (int) hash & mask;; i = (i + 1) & mask) {
                if (e[2 * i + 1] == 0) {
                    e[2 * i] = id;
                    e[2 * i + 1] = tick;
                    if (++size * 2 > capacity()) {
                        grow();
                    }
                    return;
                }
                if (e[2 * i] == id) {
                    e[2 * i + 1] = tick;
                    return;
                }
            }
        }

        void remove(long id, long hash, long upTo) {
            long[] e = entries;
            int mask = (e.length >>> 1) - 1;
            int i = (int) hash & mask;
            while (e[2 * i + 1] != 0 && e[2 * i] != id) {
                i = (i + 1) & mask;
            }
            if (e[2 * i + 1] == 0 || e[2 * i + 1] > upTo) {
                return;
            }
            // Backward shift: move later entries of the run into the hole where their probe allows.
            int hole = i;
            for (int j = (hole + 1) & mask; e[2 * j + 1] != 0; j = (j + 1) & mask) {
                int home = (int) (Slots.mix(e[2 * j]) >>> 6) & mask;
                boolean movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
                if (movable) {
                    e[2 * hole] = e[2 * j];
                    e[2 * hole + 1] = e[2 * j + 1];
                    hole = j;
                }
            }
            e[2 * hole] = 0;
            e[2 * hole + 1] = 0;
            size--;
        }

        private void grow() {
            long[] old = entries;
            entries = new long[old.length * 2];
            size = 0;
            for (int i = 0; i < old.length; i += 2) {
                if (old[i + 1] != 0) {
                    put(old[i], Slots.mix(old[i]) >>> 6, old[i + 1]);
                }
            }
        }
    }
}
