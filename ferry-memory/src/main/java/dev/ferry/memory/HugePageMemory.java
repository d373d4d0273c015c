package dev.ferry.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;

/**
 * Zeroed off-heap memory mapped with {@code mmap} at a {@link #HUGE_PAGE} boundary and advised
 * for transparent huge pages ({@code madvise(MADV_HUGEPAGE)}, which takes effect where the
 * system's THP setting is {@code madvise} or {@code always}). Memory touched at random or copied
 * in large runs then costs one TLB entry and one page walk per 2 MiB instead of per 4 KiB, and
 * the kernel pins it a huge page at a time (a NIC's registration, shm's cross-process copies).
 * Pages are backed only when first written. The mapping is unmapped when its arena closes.
 * Linux only; elsewhere, or where the calls are missing, {@link #map} answers null and the caller
 * takes its arena's own allocation.
 */
public final class HugePageMemory {

    /** The huge page size of x86-64 and most AArch64 kernels. */
    public static final long HUGE_PAGE = 2L << 20;

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
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
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

    private HugePageMemory() {
    }

    /** Whether this system can map memory for huge pages. */
    public static boolean available() {
        return MMAP != null;
    }

    /**
     * {@code bytes} of zeroed memory freed when {@code arena} closes: {@linkplain #map mapped} for
     * huge pages from {@link #HUGE_PAGE} bytes up where this system can, otherwise the arena's
     * allocation at {@code alignment}.
     */
    public static MemorySegment allocate(Arena arena, long bytes, long alignment) {
        MemorySegment mapped = bytes >= HUGE_PAGE ? map(arena, bytes) : null;
        return mapped != null ? mapped : arena.allocate(bytes, alignment);
    }

    /**
     * {@code bytes} of zeroed memory at a 2 MiB boundary, advised for huge pages, unmapped when
     * {@code arena} closes.
     *
     * @return the memory, or null where this system cannot map it (the caller allocates otherwise)
     */
    public static MemorySegment map(Arena arena, long bytes) {
        if (MMAP == null) {
            return null;
        }
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

    /** Advises exactly {@code bytes} at {@code address} (a 2 MiB boundary) for huge pages; advice only, ignored where refused. */
    static void advise(long address, long bytes) {
        if (MADVISE == null) {
            return;
        }
        try {
            int ignored = (int) MADVISE.invokeExact(address, bytes, MADV_HUGEPAGE);
        } catch (Throwable e) {
            // advice only
        }
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
