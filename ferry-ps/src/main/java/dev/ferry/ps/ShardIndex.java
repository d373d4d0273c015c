package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The id index of one {@link Shard}: an open-addressing hash index from id to row number, a
 * power-of-two number of 16-byte entries ({@code id i64 | row + 1 i64}, {@code row + 1 == 0}: an
 * empty entry), linear probing, at most 3/8 full for rows of 512 bytes or more and 5/8 for smaller
 * ones ({@link #maxLoadEighths}), deletion by backward shift (no tombstones).
 * Each generation lives in a shared arena of its own; growing it rehashes only the entries,
 * reading the ids back from the shard's records, and closes the old generation's arena.
 *
 * <p>One per shard, owned by it, under the shard's contract: every method but {@link #find},
 * {@link #readHomes} and {@link #homeLines} is called by a writer that holds the shard's
 * {@link Shard#lock} (inside a write, for the changes); {@link #find} and {@link #readHomes} are
 * also called without the lock by the shard's optimistic readers, between
 * {@link Shard#readVersion} and {@link Shard#validate}, and {@link #homeLines} (addresses for a
 * prefetch, no read of the index) by gathers and pushes without the lock.
 */
final class ShardIndex {

    static final long INDEX_ENTRY_BYTES = 16;
    private static final long MIN_INDEX_ENTRIES = 64;

    /** How full the index may get, in eighths of its entries. */
    private final long maxLoad;
    private Arena indexArena;
    private MemorySegment index;

    /** An index for rows of {@code rowBytes} bytes (weights, state and header). */
    ShardIndex(long rowBytes) {
        this.maxLoad = maxLoadEighths(rowBytes);
        newIndex(MIN_INDEX_ENTRIES);
    }

    /**
     * The index's fill limit for rows of {@code rowBytes}, in eighths: 3 for rows of 512 bytes or
     * more, 5 for smaller ones. Fuller, more ids sit past their home entry, each a probe (a branch
     * the gather and the push mispredict): at 1/4 to 3/8 full instead of 5/16 to 5/8, the in-process
     * fetch took 42.8-43.3 us against 44.5-46.5 and the 4,096-id push 343-365 against 359-377 us
     * (three alternating rounds, 1M Adagrad rows of 64 weights, half full against a quarter). The
     * index then costs 43-85 bytes per row instead of 26-51: under a sixth of a 512-byte row, so
     * smaller rows keep the fuller index.
     */
    static long maxLoadEighths(long rowBytes) {
        return rowBytes >= 512 ? 3 : 5;
    }

    /** Entries of the current generation, used or empty. */
    long entries() {
        return index.byteSize() / INDEX_ENTRY_BYTES;
    }

    /**
     * The row of {@code id}, or -1. Also without the lock, between {@link Shard#readVersion} and
     * {@link Shard#validate}: the index generation is read once, and each entry's row reference is
     * written after its id, so a racing read terminates (the index is never more than 5/8 full)
     * and returns a row number of this shard or -1, which the validation then confirms or not.
     */
    int find(long id, long hash) {
        MemorySegment entries = index;
        long mask = entries.byteSize() / INDEX_ENTRY_BYTES - 1;
        // Bounded: without a racing writer an empty entry comes first (at most 5/8 full); with
        // one, entries shifted by removals could keep ahead of the probe, and the validation fails.
        long i = hash & mask;
        for (long probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
            long at = i * INDEX_ENTRY_BYTES;
            long ref = entries.get(ValueLayout.JAVA_LONG, at + 8);
            if (ref == 0) {
                return -1;
            }
            if (entries.get(ValueLayout.JAVA_LONG, at) == id) {
                return (int) (ref - 1);
            }
        }
        return -1;
    }

    /**
     * The home entry of each position of {@code order[from, to)} (by {@code hash}) as a span of one
     * line into {@code spans} from long {@code n}; returns the longs written up to. Without the
     * lock: an address, not a read.
     */
    int homeLines(int[] order, int from, int to, long[] hash, long[] spans, int n) {
        MemorySegment entries = index;
        long base = entries.address();
        long mask = entries.byteSize() / INDEX_ENTRY_BYTES - 1;
        for (int k = from; k < to; k++) {
            spans[n++] = base + (hash[order[k]] & mask) * INDEX_ENTRY_BYTES;
            spans[n++] = 1;
        }
        return n;
    }

    /**
     * The home entry of each id {@code i = order[k]}, {@code k} in {@code [from, to)}: its id to
     * {@code entryId[i]}, its row reference ({@code row + 1}, 0: empty) to {@code entryRef[i]}.
     * Loads only, from one generation of the index, with nothing branching on them, so that the
     * entries' cache misses of many ids are under way at once ({@link #find}'s probe loop branches
     * on each entry it loads, and keeps a few). A caller looks up with {@link #find} the ids
     * whose home entry does not hold them (their home line now in cache). Called by a push under
     * the lock, and by optimistic readers between {@link Shard#readVersion} and
     * {@link Shard#validate}, as {@link #find} is.
     */
    void readHomes(int[] order, int from, int to, long[] hash, long[] entryId, long[] entryRef) {
        MemorySegment entries = index;
        long mask = entries.byteSize() / INDEX_ENTRY_BYTES - 1;
        for (int k = from; k < to; k++) {
            int i = order[k];
            long at = (hash[i] & mask) * INDEX_ENTRY_BYTES;
            entryRef[i] = entries.get(ValueLayout.JAVA_LONG, at + 8);
            entryId[i] = entries.get(ValueLayout.JAVA_LONG, at);
        }
    }

    /**
     * Before the shard adds slot {@code slots - 1} (inside a write): doubles the index, rehashing
     * the live rows of {@code shard}, if {@code slots} entries would fill it past its limit.
     */
    void growFor(long slots, Shard shard) {
        long entries = entries();
        if (slots * 8 > entries * maxLoad) {
            rehash(entries * 2, shard);
        }
    }

    /** Adds the entry of {@code id}, which must be absent, for {@code row} (inside a write). */
    void insert(long id, long hash, int row) {
        insert(index, id, hash, row);
    }

    /**
     * Deletes the entry of {@code id}, which must point at {@code row}, by backward-shift deletion
     * (inside a write).
     */
    void remove(long id, int row) {
        MemorySegment entries = index;
        long mask = entries.byteSize() / INDEX_ENTRY_BYTES - 1;
        long i = Slots.mix(id) & mask;
        while (entries.get(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8) != row + 1L) {
            i = (i + 1) & mask;
        }
        // Move later entries of the probe run back into the hole while their home allows it.
        for (long j = (i + 1) & mask;; j = (j + 1) & mask) {
            long ref = entries.get(ValueLayout.JAVA_LONG, j * INDEX_ENTRY_BYTES + 8);
            if (ref == 0) {
                break;
            }
            long movedId = entries.get(ValueLayout.JAVA_LONG, j * INDEX_ENTRY_BYTES);
            long home = Slots.mix(movedId) & mask;
            boolean stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
            if (!stays) {
                entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES, movedId);
                entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8, ref);
                i = j;
            }
        }
        entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8, 0L);
        entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES, 0L);
    }

    /**
     * Checks that every live row of {@code shard} is found by its id at its slot and the index
     * holds no other entry; for tests (under the lock). Returns the live rows.
     */
    int checkIndex(Shard shard) {
        int live = 0;
        for (int row = 0; row < shard.rows(); row++) {
            if (shard.live(row)) {
                long id = shard.id(row);
                if (find(id, Slots.mix(id)) != row) {
                    throw new AssertionError("live row " + row + " (id " + id + ") is not in the index");
                }
                live++;
            }
        }
        long entries = 0;
        for (long at = 0; at < index.byteSize(); at += INDEX_ENTRY_BYTES) {
            if (index.get(ValueLayout.JAVA_LONG, at + 8) != 0) {
                entries++;
            }
        }
        if (entries != live || live != shard.liveRows()) {
            throw new AssertionError(entries + " index entries, " + live + " live rows, " + shard.liveRows()
                    + " counted");
        }
        return live;
    }

    /** Bytes of the current generation. */
    long byteSize() {
        return index.byteSize();
    }

    /** Frees the current generation; readers still on it fail with {@link IllegalStateException}. */
    void close() {
        indexArena.close();
    }

    private static void insert(MemorySegment entries, long id, long hash, int row) {
        long mask = entries.byteSize() / INDEX_ENTRY_BYTES - 1;
        long i = hash & mask;
        while (entries.get(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8) != 0) {
            i = (i + 1) & mask;
        }
        entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES, id);
        entries.set(ValueLayout.JAVA_LONG, i * INDEX_ENTRY_BYTES + 8, row + 1L);
    }

    private void newIndex(long entries) {
        indexArena = Arena.ofShared();
        index = RowMemory.allocate(indexArena, entries * INDEX_ENTRY_BYTES);
    }

    /** A new generation, filled before readers can see it; the old one is freed. */
    private void rehash(long entries, Shard shard) {
        Arena fresh = Arena.ofShared();
        MemorySegment next = RowMemory.allocate(fresh, entries * INDEX_ENTRY_BYTES);
        for (int row = 0; row < shard.rows(); row++) {
            if (shard.live(row)) {
                long id = shard.id(row);
                insert(next, id, Slots.mix(id), row);
            }
        }
        Arena old = indexArena;
        indexArena = fresh;
        index = next;
        old.close();
    }
}
