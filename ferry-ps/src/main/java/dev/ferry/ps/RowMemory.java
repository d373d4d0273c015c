package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferry.memory.HugePageMemory;

/**
 * Zeroed off-heap memory for a table's rows and index. A region of {@link #HUGE_PAGE} bytes or
 * more is mapped for transparent huge pages ({@link HugePageMemory}): a gather or push touches
 * rows at random over hundreds of megabytes, and with 4 KiB pages nearly every row costs a TLB
 * miss and a page walk (measured: a random 256-byte row read from 550 MB takes 100-370 ns with
 * 4 KiB pages, 37-53 ns with huge pages). Smaller regions, other systems, or
 * {@code -Dferry.ps.hugePages=false} take the arena's own allocation. Pages are only backed
 * when first written, so a mapped region costs what its rows use, rounded to huge pages.
 */
final class RowMemory {

    /** The huge page size of x86-64 and most aarch64 kernels. */
    static final long HUGE_PAGE = HugePageMemory.HUGE_PAGE;

    private static final boolean HUGE_PAGES =
            Boolean.parseBoolean(System.getProperty("ferry.ps.hugePages", "true")) && HugePageMemory.available();

    private RowMemory() {
    }

    /** Whether large regions are mapped for huge pages. */
    static boolean hugePages() {
        return HUGE_PAGES;
    }

    /** {@code bytes} of zeroed memory, aligned to 64 bytes at least, freed when {@code arena} closes. */
    static MemorySegment allocate(Arena arena, long bytes) {
        return HUGE_PAGES ? HugePageMemory.allocate(arena, bytes, 64) : arena.allocate(bytes, 64);
    }
}
