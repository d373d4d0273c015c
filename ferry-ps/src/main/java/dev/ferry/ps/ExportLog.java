package dev.ferry.ps;

import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntPredicate;
import java.util.function.LongSupplier;
import java.util.List;
import java.util.ArrayList;

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
 * <p>Deletions. A row the evictor deletes is stamped like a change, and its id keeps a
 * <em>death record</em>: the tick and time of its last deletion and the most steps a deleted
 * copy had (the <em>floor</em>). An export sends, for an id with a death record, a tombstone
 * with the floor, and the row too if it was made again: a follower deletes its copy if it has at
 * most the floor's steps (so a copy of an older life goes, a newer row stays), then merges the
 * row. Death records are forgotten {@link #retentionNanos()} after the deletion, and with them
 * the entries of ids still absent; a follower whose cursor is older than the newest tick
 * forgotten ({@link #forgottenUpTo()}) may have missed a deletion and must resync.
 *
 * <p>Dense tensors: per tensor the tick of its last step or merge, set under the tensor's lock;
 * an export sends the whole tensor if that tick is after the follower's cursor.
 *
 * <p>Thread safety: marks come from any writing thread, each under one of 64 stripe locks; seals
 * are serialised; queries take one stripe lock at a time.
 */
public final class ExportLog {

    /** How long a deletion is remembered by default: one hour (360 polls at the 10 s interval). */
    public static final long DEFAULT_RETENTION_NANOS = 3_600_000_000_000L;

    private static final int STRIPES = 64;
    /** Main stripes: id, tick. */
    private static final int CHANGE = 2;
    /** Death records: id, tick, floor steps, time, made again since (0 or 1). */
    private static final int DEATH = 5;

    private final ParameterServer ps;
    private final long id;
    private final long retentionNanos;
    private final LongSupplier clock;
    /** The tick changes are stamped with now; read under a stripe lock. */
    private volatile long openTick = 1;
    /** The newest tick of a forgotten death record (0: none forgotten). */
    private volatile long forgottenUpTo;
    private final Map<String, Touched> tables = new ConcurrentHashMap<>();
    private final Map<String, DenseMark> dense = new ConcurrentHashMap<>();

    /** A log of {@code ps}'s changes, idle until the first {@link #seal}; deletions kept an hour. */
    public ExportLog(ParameterServer ps) {
        this(ps, DEFAULT_RETENTION_NANOS, System::nanoTime);
    }

    /** With a retention of deletions and a clock (nanoseconds): tests inject both. */
    public ExportLog(ParameterServer ps, long retentionNanos, LongSupplier clock) {
        this.ps = java.util.Objects.requireNonNull(ps, "ps");
        if (retentionNanos <= 0) {
            throw new IllegalArgumentException("a retention of " + retentionNanos + " ns: must be positive");
        }
        this.retentionNanos = retentionNanos;
        this.clock = java.util.Objects.requireNonNull(clock, "clock");
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

    /** How long a deletion is remembered. */
    public long retentionNanos() {
        return retentionNanos;
    }

    /** The newest tick of a forgotten deletion: a cursor before it may have missed one (0: none). */
    public long forgottenUpTo() {
        return forgottenUpTo;
    }

    /**
     * Picks up the sparse tables and dense tensors not recorded yet (their listeners, then every
     * row they store), forgets the deletions older than the retention, then closes the open tick
     * and returns it: every change stamped up to it is in its row now.
     */
    public synchronized long seal() {
        for (TableStats stats : ps.stats()) {
            if (tables.containsKey(stats.name())) {
                continue;
            }
            SparseTable table;
            try {
                table = ps.table(stats.name());
            } catch (PsException notSparse) {
                pickUpDense(stats.name());
                continue;
            }
            Touched touched = new Touched();
            table.onChange(touched);
            // After the listener: a row changed meanwhile is in the scan or marked by it.
            RowTransfer.export(table, x -> true, 1 << 20, rows -> {
                long rowBytes = RowTransfer.rowBytes(table);
                for (long at = 0; at < rows.byteSize(); at += rowBytes) {
                    touched.changed(RowTransfer.idOf(rows, at));
                }
            });
            tables.put(stats.name(), touched);
        }
        long now = clock.getAsLong();
        for (Touched t : tables.values()) {
            t.prune(now);
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
        for (DenseMark m : dense.values()) {
            synchronized (m) {
                assert m.tick <= sealing + 1;
            }
        }
        return sealing;
    }

    private void pickUpDense(String name) {
        DenseTensor tensor;
        try {
            tensor = ps.dense(name);
        } catch (PsException gone) {
            return;
        }
        DenseMark known = dense.get(name);
        if (known != null && known.tensor == tensor) {
            return;
        }
        DenseMark mark = new DenseMark(tensor);
        tensor.onChange(mark::mark);
        mark.mark(); // after the listener: the tensor as it is now is stamped
        dense.put(name, mark);
    }

    /** Whether {@code table} is recorded (picked up by a seal). */
    public boolean records(String table) {
        return tables.containsKey(table);
    }

    /** The dense tensors recorded, by name, ascending. */
    public List<String> denseNames() {
        List<String> names = new ArrayList<>(dense.keySet());
        names.sort(null);
        return names;
    }

    /**
     * The tick of the last step or merge of dense tensor {@code name} (set under its lock, so a
     * copy of it taken after this read holds every change stamped up to it), or -1 if not recorded.
     */
    public long denseTick(String name) {
        DenseMark m = dense.get(name);
        return m == null ? -1 : m.tick;
    }

    /** The recorded dense tensor of that name (the object whose changes are stamped), or null. */
    public DenseTensor denseTensor(String name) {
        DenseMark m = dense.get(name);
        return m == null ? null : m.tensor;
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
                long[] e = s.changes.entries;
                for (int i = 0; i < s.changes.capacity(); i++) {
                    long tick = e[CHANGE * i + 1];
                    long key = e[CHANGE * i];
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
     * The floor of {@code id} of {@code table}: the most steps a deleted copy of its row had, if
     * a deletion of it is remembered; else -1.
     */
    public long floor(String table, long id) {
        Touched t = tables.get(table);
        if (t == null) {
            return -1;
        }
        long hash = Slots.mix(id);
        Stripe s = t.stripes[(int) (hash & (STRIPES - 1))];
        s.lock.lock();
        try {
            int i = s.deaths.find(id, hash >>> 6);
            return i < 0 ? -1 : s.deaths.entries[DEATH * i + 2];
        } finally {
            s.lock.unlock();
        }
    }

    /**
     * Drops {@code id} of {@code table} if its stamp is at most {@code upTo} and no deletion of it
     * is remembered: an export found its row gone without a deletion recorded. A row made again
     * since is stamped later and stays.
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
                    n += s.changes.size;
                } finally {
                    s.lock.unlock();
                }
            }
        }
        return n;
    }

    /** Deletions remembered over all tables. */
    public long tombstones() {
        long n = 0;
        for (Touched t : tables.values()) {
            for (Stripe s : t.stripes) {
                s.lock.lock();
                try {
                    n += s.deaths.size;
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
                    n += 8L * (s.changes.entries.length + s.deaths.entries.length);
                } finally {
                    s.lock.unlock();
                }
            }
        }
        return n;
    }

    /** One dense tensor's last change; the tick is written under the tensor's lock and this monitor. */
    private final class DenseMark {
        final DenseTensor tensor;
        volatile long tick;

        DenseMark(DenseTensor tensor) {
            this.tensor = tensor;
        }

        synchronized void mark() {
            tick = openTick;
        }
    }

    /** One table's stamps, in stripes by the id's hash. */
    private final class Touched implements RowListener {
        final Stripe[] stripes = new Stripe[STRIPES];

        Touched() {
            for (int i = 0; i < STRIPES; i++) {
                stripes[i] = new Stripe();
            }
        }

        @Override
        public void changed(long id) {
            long hash = Slots.mix(id);
            Stripe s = stripes[(int) (hash & (STRIPES - 1))];
            s.lock.lock();
            try {
                s.changes.put(id, hash >>> 6, openTick);
                if (s.deaths.size > 0) {
                    int i = s.deaths.find(id, hash >>> 6);
                    if (i >= 0) {
                        s.deaths.entries[DEATH * i + 4] = 1;
                    }
                }
            } finally {
                s.lock.unlock();
            }
        }

        @Override
        public void removed(long id, long steps) {
            long hash = Slots.mix(id);
            Stripe s = stripes[(int) (hash & (STRIPES - 1))];
            long now = clock.getAsLong();
            s.lock.lock();
            try {
                long tick = openTick;
                s.changes.put(id, hash >>> 6, tick);
                int i = s.deaths.find(id, hash >>> 6);
                long floor = i < 0 ? steps : Math.max(steps, s.deaths.entries[DEATH * i + 2]);
                i = s.deaths.put(id, hash >>> 6, tick);
                s.deaths.entries[DEATH * i + 2] = floor;
                s.deaths.entries[DEATH * i + 3] = now;
                s.deaths.entries[DEATH * i + 4] = 0;
            } finally {
                s.lock.unlock();
            }
        }

        void forget(long id, long upTo) {
            long hash = Slots.mix(id);
            Stripe s = stripes[(int) (hash & (STRIPES - 1))];
            s.lock.lock();
            try {
                if (s.deaths.find(id, hash >>> 6) < 0) {
                    s.changes.remove(id, hash >>> 6, upTo);
                }
            } finally {
                s.lock.unlock();
            }
        }

        /** Forgets the death records older than the retention, and the entries of ids still absent since. */
        void prune(long now) {
            long[] doomed = new long[8];
            for (Stripe s : stripes) {
                s.lock.lock();
                try {
                    if (s.deaths.size == 0) {
                        continue;
                    }
                    int n = 0;
                    long[] e = s.deaths.entries;
                    for (int i = 0; i < s.deaths.capacity(); i++) {
                        if (e[DEATH * i + 1] != 0 && now - e[DEATH * i + 3] > retentionNanos) {
                            if (2 * n + 1 >= doomed.length) {
                                doomed = Arrays.copyOf(doomed, doomed.length * 2);
                            }
                            doomed[2 * n] = e[DEATH * i];
                            // Made again since: its entry stays (stamped by that change, maybe in the same tick).
                            doomed[2 * n + 1] = e[DEATH * i + 4] == 0 ? e[DEATH * i + 1] : -e[DEATH * i + 1];
                            n++;
                        }
                    }
                    for (int k = 0; k < n; k++) {
                        long id = doomed[2 * k];
                        long tick = Math.abs(doomed[2 * k + 1]);
                        long hash = Slots.mix(id) >>> 6;
                        s.deaths.remove(id, hash, Long.MAX_VALUE);
                        if (doomed[2 * k + 1] > 0) {
                            // Still absent: nothing left to export.
                            s.changes.remove(id, hash, tick);
                        }
                        if (tick > forgottenUpTo) {
                            forgottenUpTo = tick;
                        }
                    }
                } finally {
                    s.lock.unlock();
                }
            }
        }
    }

    /** A stripe's two maps, guarded by its lock. */
    private static final class Stripe {
        final ReentrantLock lock = new ReentrantLock();
        final ExportIdMap changes = new ExportIdMap(CHANGE);
        final ExportIdMap deaths = new ExportIdMap(DEATH);
    }
}
