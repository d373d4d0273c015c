package dev.ferry.ps;

import java.lang.foreign.MemorySegment;

/**
 * The (address, lines) pairs of a prefetch call ({@link LinePrefetch#spans}): an array the caller
 * fills, wrapped once as the segment the downcall takes. A wrapper made per call is not always
 * removed by the JIT's escape analysis (one JMH fork of the Adam gather allocated 145 bytes per
 * gather that way, the others none). Per thread: a {@link Scratch}'s.
 */
final class LineSpans {

    /** {@code pairs[2i]} an address, {@code pairs[2i + 1]} a number of 64-byte lines from it. */
    final long[] pairs;
    final MemorySegment segment;

    LineSpans(int pairs) {
        this.pairs = new long[2 * pairs];
        this.segment = MemorySegment.ofArray(this.pairs);
    }
}
