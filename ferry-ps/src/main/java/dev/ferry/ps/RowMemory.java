package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Zeroed off-heap memory for a table's rows and index. A region of {@link #HUGE_PAGE} bytes or
 * more is mapped with {@code mmap} at a 2 MiB boundary and advised for transparent huge pages
 * ({@code madvise(MADV_HUGEPAGE)}): a gather or push touches rows at random over hundreds of
 * megabytes, and with 4 KiB pages nearly every row costs a TLB miss and a page walk (measured:
 * a random 256-byte row read from 550 MB takes 100-370 ns with 4 KiB pages, 37-53 ns with huge
 * pages). The mapping is unmapped when its arena closes. Smaller regions, other systems, or
 * {@code -Dferry.ps.hugePages=false} take the arena's own allocation. Pages are only backed
 * when first written, so a mapped region costs what its rows use, rounded to huge pages.
 */
final class RowMemory {

    /** The huge page size of x86-64 and most aarch64 kernels. */
    static final long HUGE_PAGE = 2L << 20;

    private static final int PROT_READ_WRITE = 0x3;
    private static final int MAP_PRIVATE_ANONYMOUS = 0x02 | 0x20;
    private static final int MADV_HUGEPAGE = 14;

    private static final MethodHandle MMAP;
    private static final MethodHandle MUNMAP;
    private static final MethodHandle MADVISE;

    static {
        MethodHandle mmap = null;
        MethodHandle munmap = null;
        MethodHandle madvise = null;
        boolean wanted = Boolean.parseBoolean(System.getProperty("ferry.ps.hugePages", "true"))
                && System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux");
        if (wanted) {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
                munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
                madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                                ValueLayout.JAVA_INT));
            } catch (RuntimeException | Error unavailable) {
                mmap = null;
            }
        }
        MMAP = mmap;
        MUNMAP = munmap;
        MADVISE = madvise;
    }

    private RowMemory() {
    }

    /** Whether large regions are mapped for huge pages. */
    static boolean hugePages() {
        return MMAP != null;
    }

    /** {@code bytes} of zeroed memory, aligned to 64 bytes at least, freed when {@code arena} closes. */
    static MemorySegment allocate(Arena arena, long bytes) {
        if (MMAP != null && bytes >= HUGE_PAGE) {
            MemorySegment mapped = map(arena, bytes);
            if (mapped != null) {
                return mapped;
            }
        }
        return arena.allocate(bytes, 64);
    }

    private static MemorySegment map(Arena arena, long bytes) {
        long used = roundUp(bytes, HUGE_PAGE);
        long length = used + HUGE_PAGE;
        long base;
        try {
            base = (long) MMAP.invokeExact(0L, length, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0L);
        } catch (Throwable e) {
            return null;
        }
        if (base == -1L || base == 0L) {
            return null; // MAP_FAILED: the arena's allocation reports the shortage
        }
        long aligned = roundUp(base, HUGE_PAGE);
        try {
            int ignored = (int) MADVISE.invokeExact(aligned, used, MADV_HUGEPAGE); // advice; 4 KiB pages otherwise
        } catch (Throwable e) {
            // advice only
        }
        return MemorySegment.ofAddress(aligned).reinterpret(bytes, arena, segment -> unmap(base, length));
    }

    private static void unmap(long base, long length) {
        try {
            int ignored = (int) MUNMAP.invokeExact(base, length);
        } catch (Throwable e) {
            // nothing to do at close
        }
    }

    private static long roundUp(long value, long unit) {
        return (value + unit - 1) & -unit;
    }
}
