package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

class LeakDetectionTest {

    private static List<LeakReport> awaitReports(RegisteredAllocator allocator, List<LeakReport> reports, int count)
            throws InterruptedException {
        for (int i = 0; i < 100 && reports.size() < count; i++) {
            System.gc();
            Thread.sleep(10);
            allocator.reportLeaks();
        }
        return reports;
    }

    @Test
    void aLeakedBufferIsReportedWithItsAllocationSite() throws Exception {
        List<LeakReport> reports = new CopyOnWriteArrayList<>();
        RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE,
                AllocatorConfig.defaults().withSlabBytes(1 << 20).withLeakDetection(LeakDetection.PARANOID, reports::add));
        for (int i = 0; i < 100; i++) {
            allocator.tryAllocate(PoolKind.SEND, 512).release();
        }
        allocator.tryAllocate(PoolKind.RECEIVE, 512).segment().fill((byte) 1); // dropped: the leak

        awaitReports(allocator, reports, 1);
        assertEquals(1, reports.size(), "exactly the one leaked buffer, none of the released ones");
        LeakReport report = reports.getFirst();
        System.out.println(report.describe());
        assertNotNull(report.allocationSite());
        assertTrue(report.buffer().startsWith("RegisteredBuffer[RECEIVE 512 B"), report.buffer());
        assertTrue(report.describe().contains("aLeakedBufferIsReportedWithItsAllocationSite"), report.describe());
        assertEquals(1, allocator.stats().leaks());

        IllegalStateException closing = assertThrows(IllegalStateException.class, allocator::close);
        assertTrue(closing.getMessage().contains("1 buffers in use"), closing.getMessage());
    }

    @Test
    void sampledModeFindsEveryLeakAndSamplesTheSite() throws Exception {
        List<LeakReport> reports = new CopyOnWriteArrayList<>();
        AllocatorConfig config = AllocatorConfig.defaults().withSlabBytes(1 << 20)
                .withLeakDetection(LeakDetection.SAMPLED, reports::add);
        RegisteredAllocator allocator = new RegisteredAllocator(MemoryRegistrar.NONE, config);
        for (int i = 0; i < 3; i++) {
            allocator.tryAllocate(PoolKind.SEND, 100_000).capacity();
        }
        awaitReports(allocator, reports, 3);
        assertEquals(3, reports.size());
        for (LeakReport report : reports) {
            assertTrue(report.describe().startsWith("LEAK: RegisteredBuffer[SEND 131072 B"), report.describe());
        }
        assertThrows(IllegalStateException.class, allocator::close);
    }
}
