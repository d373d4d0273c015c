package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * The native prefetch helper: built with the module and loaded here (the fallback run of the
 * module's tests, {@code -Dferry.ps.prefetch=false}, checks it is off there), harmless on any
 * address, and changes no byte.
 */
class LinePrefetchTest {

    @Test
    void theHelperIsLoadedUnlessTurnedOff() {
        boolean wanted = Boolean.parseBoolean(System.getProperty("ferry.ps.prefetch", "true"));
        assertEquals(wanted, LinePrefetch.ENABLED,
                "the module builds ferry_prefetch.c for this machine; -Dferry.ps.prefetch=false turns it off");
    }

    @Test
    void prefetchingChangesNoByte() {
        assumeTrue(LinePrefetch.ENABLED);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment rows = arena.allocate(1 << 16, 64);
            for (long i = 0; i < rows.byteSize() / 8; i++) {
                rows.setAtIndex(ValueLayout.JAVA_LONG, i, i * 0x9E3779B97F4A7C15L);
            }
            byte[] before = rows.toArray(ValueLayout.JAVA_BYTE);
            long[] spans = {rows.address(), 1, rows.address() + 4096, 16, rows.address() + 60, 2,
                    rows.address() + rows.byteSize() - 64, 1};
            LinePrefetch.spans(of(spans), 4);
            assertArrayEquals(before, rows.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    @Test
    void unmappedFreedAndNonCanonicalAddressesAreIgnored() {
        assumeTrue(LinePrefetch.ENABLED);
        long freed;
        try (Arena arena = Arena.ofConfined()) {
            // Large enough to be its own mapping, unmapped again when the arena closes.
            freed = arena.allocate(64L << 20, 4096).address();
        }
        long[] spans = {0, 4, 64, 1, freed, 1024, 1L << 47, 8, -4096, 2, 0x7fff_ffff_ffc0L, 1};
        LinePrefetch.spans(of(spans), spans.length / 2);
        LinePrefetch.spans(of(spans), 0);
        assertTrue(LinePrefetch.ENABLED, "still here: no address faulted");
    }

    private static LineSpans of(long[] pairs) {
        LineSpans spans = new LineSpans(pairs.length / 2);
        System.arraycopy(pairs, 0, spans.pairs, 0, pairs.length);
        return spans;
    }
}
