package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Registered slabs and large buffers in huge pages: aligned to 2 MiB, zeroed, backed by huge
 * pages once written where the system's THP setting allows it, and unmapped when freed.
 */
class HugePageMemoryTest {

    private static final long MIB = 1L << 20;

    @Test
    void aMappingIsAlignedZeroedAndUnmappedWithItsArena() throws IOException {
        Assumptions.assumeTrue(HugePageMemory.available(), "not Linux");
        long address;
        String mapping;
        try (Arena arena = Arena.ofShared()) {
            MemorySegment segment = HugePageMemory.map(arena, 3 * MIB + 5);
            assertNotNull(segment);
            address = segment.address();
            assertEquals(0, address % HugePageMemory.HUGE_PAGE);
            assertEquals(3 * MIB + 5, segment.byteSize());
            for (long i = 0; i < segment.byteSize(); i += 4096) {
                assertEquals(0, segment.get(ValueLayout.JAVA_BYTE, i));
            }
            segment.fill((byte) 7);
            assertEquals(7, segment.get(ValueLayout.JAVA_BYTE, segment.byteSize() - 1));
            mapping = header(address);
            assertNotNull(mapping, "no mapping in /proc/self/smaps covers the memory");
        }
        String after = header(address);
        assertTrue(after == null || !after.equals(mapping), "still mapped after its arena closed: " + mapping);
    }

    @Test
    void smallRegionsTakeTheArenasAllocationAndLargeOnesAreMapped() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment small = HugePageMemory.allocate(arena, 4096 + 3, 64);
            assertEquals(4096 + 3, small.byteSize());
            assertEquals(0, small.address() % 64);
            MemorySegment large = HugePageMemory.allocate(arena, 2 * MIB, 64);
            assertEquals(2 * MIB, large.byteSize());
            if (HugePageMemory.available()) {
                assertEquals(0, large.address() % HugePageMemory.HUGE_PAGE, "a region of a huge page or more is mapped");
            }
            large.fill((byte) 3);
            assertEquals(3, large.get(ValueLayout.JAVA_BYTE, 2 * MIB - 1));
        }
    }

    @Test
    void aPoolsSlabsAreBackedByHugePages() throws IOException {
        Assumptions.assumeTrue(PoolArena.HUGE_PAGES, "huge pages off or not Linux");
        String thp = Files.readString(Path.of("/sys/kernel/mm/transparent_hugepage/enabled"));
        Assumptions.assumeTrue(thp.contains("[madvise]") || thp.contains("[always]"), "THP is off: " + thp.trim());
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(4 * MIB);
        try (RegisteredAllocator allocator = new RegisteredAllocator(new CountingRegistrar(), config)) {
            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, 64 * 1024);
            assertNotNull(buffer);
            MemorySegment segment = buffer.segment();
            segment.fill((byte) 1);
            long hugeKb = anonHugePagesKb(segment.address());
            // A fault in a 2 MiB-aligned, advised region takes a whole huge page when one is free.
            assertTrue(hugeKb >= 2048, "the slab holding " + Long.toHexString(segment.address())
                    + " has " + hugeKb + " kB in huge pages");
            buffer.release();
        }
    }

    /** The smaps header line (range, permissions, offset) of the mapping that covers {@code address}, or null. */
    private static String header(long address) throws IOException {
        List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
        for (String line : lines) {
            long[] range = range(line);
            if (range != null && Long.compareUnsigned(address, range[0]) >= 0 && Long.compareUnsigned(address, range[1]) < 0) {
                return line;
            }
        }
        return null;
    }

    private static long[] range(String line) {
        int dash = line.indexOf('-');
        int space = line.indexOf(' ');
        if (dash <= 0 || space < dash || !line.substring(0, dash).matches("[0-9a-f]+")) {
            return null;
        }
        return new long[] {Long.parseUnsignedLong(line.substring(0, dash), 16),
                Long.parseUnsignedLong(line.substring(dash + 1, space), 16)};
    }

    /** The AnonHugePages of the mapping that covers {@code address}, in kB. */
    private static long anonHugePagesKb(long address) throws IOException {
        List<String> lines = region(address);
        assertNotNull(lines, "no mapping covers " + Long.toHexString(address));
        for (String line : lines) {
            if (line.startsWith("AnonHugePages:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        return 0;
    }

    /** The smaps lines of the mapping that covers {@code address}, or null. */
    private static List<String> region(long address) throws IOException {
        List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
        for (int i = 0; i < lines.size(); i++) {
            long[] range = range(lines.get(i));
            if (range != null && Long.compareUnsigned(address, range[0]) >= 0 && Long.compareUnsigned(address, range[1]) < 0) {
                int next = i + 1;
                while (next < lines.size() && range(lines.get(next)) == null) {
                    next++;
                }
                return lines.subList(i + 1, next);
            }
        }
        return null;
    }
}
