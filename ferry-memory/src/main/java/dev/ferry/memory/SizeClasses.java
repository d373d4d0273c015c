package dev.ferry.memory;

/**
 * Size classes, runs and slabs: the layout of allocator memory.
 *
 * <pre>
 * slab (slabBytes, registered once, 2 MiB aligned)
 * +--------------------+--------------------+---------+------------------------------+
 * | run: 1024 x 64 B   | run: 32 x 4 KiB    |  free   | run: 4 x 256 KiB             |
 * | (one 64 KiB page)  | (two pages)        |         | (16 pages)                   |
 * +--------------------+--------------------+---------+------------------------------+
 *   pages of 64 KiB, handed out in power-of-two blocks by a buddy allocator
 * </pre>
 *
 * <p>Classes are powers of two from 64 B to {@code maxClassBytes}: a request maps to its class
 * with one {@code numberOfLeadingZeros}, every slot is aligned to its own size (cache lines for
 * small ones, pages for 4 KiB and up, which NICs prefer), and eager buffers, which are the bulk
 * of traffic, come in fixed power-of-two sizes anyway. The price is up to half a slot of waste
 * for odd sizes.
 *
 * <p>A run is a block of pages dedicated to one class, about 32 slots but never under a page, so
 * a class in little use holds little memory; when every slot of a run is free again the run goes
 * back to the slab and can serve another class.
 */
final class SizeClasses {

    /** The smallest class: one cache line. */
    static final int MIN_CLASS = 64;
    static final int MIN_SHIFT = 6;
    /** The unit of the buddy allocator inside a slab. */
    static final int PAGE_BYTES = 64 * 1024;
    static final int PAGE_SHIFT = 16;
    /** Slots a run aims for: enough to fill a thread cache batch with one run. */
    static final int SLOTS_PER_RUN = 32;
    /** Runs grow to this size before they hold fewer than {@link #SLOTS_PER_RUN} slots. */
    static final int MAX_SHARED_RUN = 1 << 20;
    /** Slab alignment: the x86-64 huge page, so transparent huge pages can back slabs. */
    static final long SLAB_ALIGNMENT = 2L << 20;

    private SizeClasses() {
    }

    /** The class index of {@code size} (0 for 64 B); {@code size} must not exceed the largest class. */
    static int index(int size) {
        return size <= MIN_CLASS ? 0 : 32 - MIN_SHIFT - Integer.numberOfLeadingZeros(size - 1);
    }

    /** The slot size of class {@code index}. */
    static int size(int index) {
        return MIN_CLASS << index;
    }

    /** The number of classes up to {@code maxClassBytes}. */
    static int count(int maxClassBytes) {
        return index(maxClassBytes) + 1;
    }

    /** Bytes of one run of class size {@code slotBytes}: a power of two, at least a page. */
    static long runBytes(int slotBytes) {
        long bytes = Math.min((long) slotBytes * SLOTS_PER_RUN, MAX_SHARED_RUN);
        return Math.max(PAGE_BYTES, Math.max(slotBytes, bytes));
    }

    /**
     * Rounds a request above the largest class up to one of four steps per power of two, so a
     * transfer of similar size finds a cached registration again, at most a quarter wasted.
     */
    static long largeBytes(long size) {
        long pow = Long.highestOneBit(size - 1);
        long step = Math.max(pow >>> 2, 4096);
        return (size + step - 1) & -step;
    }
}
