package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * Per-thread working arrays of {@link SparseTable#gather} and {@link SparseTable#apply}, so that
 * the data path allocates nothing in steady state. A thread works on one request at a time and
 * the table methods do not nest, so one instance per thread serves every table. Arrays grow to
 * the largest request seen up to {@link #RETAINED} ids; a larger request gets arrays of its own,
 * freed with it.
 */
final class Scratch {

    /**
     * Ids whose arrays a thread keeps (60 bytes each with compressed references, and 16 more of
     * {@link #spans(int)} where the prefetch is on: 4.75 MiB at most).
     */
    static final int RETAINED = 1 << 16;
    /** Ids a gather looks up before it copies their rows (the lookups' cache misses overlap). */
    static final int GATHER_CHUNK = 1 << 12;

    private static final ThreadLocal<Scratch> CACHE = ThreadLocal.withInitial(Scratch::new);

    long[] hash = new long[0];
    long[] version = new long[0];
    int[] row = new int[0];
    int[] order = new int[0];
    /**
     * The home index entries (id, row reference) of a gather's or a push's ids, and their rows'
     * chunks, weight offsets and record offsets (a push's); the chunks are cleared after use.
     */
    long[] entryId = new long[0];
    long[] entryRef = new long[0];
    MemorySegment[] chunk = new MemorySegment[0];
    long[] at = new long[0];
    long[] recordAt = new long[0];
    int[] shardStart = new int[257];
    int[] shardCursor = new int[256];
    /** Where the cache-line touches of the last gather or apply leave their folded value, so that the JIT keeps them. */
    long touched;

    /**
     * Spans of lines to prefetch ({@link LinePrefetch#spans}); grown on demand (only where the
     * prefetch is on), to as many pairs as the ids' arrays have room for ids.
     */
    private LineSpans spans = new LineSpans(0);

    /** {@link #spans} with room for {@code pairs} (address, lines) pairs. */
    LineSpans spans(int pairs) {
        if (spans.pairs.length < 2 * pairs) {
            spans = new LineSpans(Math.max(pairs, hash.length));
        }
        return spans;
    }

    /** This thread's scratch with room for {@code count} ids. */
    static Scratch of(int count) {
        if (count > RETAINED) {
            Scratch once = new Scratch();
            once.grow(count);
            return once;
        }
        Scratch scratch = CACHE.get();
        if (scratch.hash.length < count) {
            scratch.grow(Math.max(count, Math.min(RETAINED, scratch.hash.length * 2)));
        }
        return scratch;
    }

    private void grow(int count) {
        hash = new long[count];
        version = new long[count];
        row = new int[count];
        order = new int[count];
        entryId = new long[count];
        entryRef = new long[count];
        chunk = new MemorySegment[count];
        at = new long[count];
        recordAt = new long[count];
    }
}
