package dev.ferry.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

class BufferLifecycleTest {

    private static RegisteredAllocator allocator(LeakDetection level) {
        return new RegisteredAllocator(new CountingRegistrar(),
                AllocatorConfig.defaults().withSlabBytes(1 << 20).withLeakDetection(level, r -> { }));
    }

    private static void assertReleased(Executable use) {
        IllegalStateException e = assertThrows(IllegalStateException.class, use);
        assertTrue(e.getMessage().startsWith("RegisteredBuffer[SEND "), e.getMessage());
        assertTrue(e.getMessage().contains("refCnt 0"), e.getMessage());
        assertTrue(e.getMessage().contains("after release"), e.getMessage());
    }

    @Test
    void doubleReleaseIsCaught() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.SAMPLED)) {
            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, 4000);
            assertTrue(buffer.release());
            assertReleased(buffer::release);
            assertEquals(0, buffer.refCnt());
        }
    }

    @Test
    void useAfterReleaseIsCaught() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.SAMPLED)) {
            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, 4096);
            buffer.release();
            assertReleased(buffer::segment);
            assertReleased(buffer::descriptor);
            assertReleased(buffer::key);
            assertReleased(buffer::remoteAddress);
            assertReleased(buffer::retain);
            assertReleased(() -> buffer.slice(0, 8));
        }
    }

    @Test
    void paranoidModeCatchesAStaleReferenceEvenAfterTheSlotIsReused() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.PARANOID)) {
            RegisteredBuffer first = allocator.tryAllocate(PoolKind.SEND, 4096);
            long address = first.segment().address();
            first.release();
            RegisteredBuffer second = allocator.tryAllocate(PoolKind.SEND, 4096);
            assertEquals(address, second.segment().address(), "same slot");
            assertNotSame(first, second, "a fresh object for the slot");
            assertReleased(first::release);
            assertReleased(first::segment);
            assertEquals(1, second.refCnt(), "the new owner is untouched");
            second.release();
        }
    }

    @Test
    void buffersAreRecycledAndAStaleSliceIsCaughtAfterReuse() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.SAMPLED)) {
            RegisteredBuffer first = allocator.tryAllocate(PoolKind.SEND, 4096);
            RegisteredBuffer slice = first.slice(16, 32);
            first.release();
            RegisteredBuffer second = allocator.tryAllocate(PoolKind.SEND, 4096);
            assertSame(first, second, "buffer objects are reused: nothing allocated per allocation");
            assertEquals(0, slice.refCnt());
            assertReleased(slice::segment);
            assertReleased(slice::release);
            assertEquals(1, second.refCnt(), "the stale slice did not touch the new owner's count");
            second.release();
        }
    }

    @Test
    void slicesShareTheReferenceCountAndTheRegistration() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.PARANOID)) {
            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.RECEIVE, 1000);
            assertEquals(1024, buffer.capacity());
            assertEquals(PoolKind.RECEIVE, buffer.pool());
            RegisteredBuffer slice = buffer.retainedSlice(8, 100);
            assertEquals(2, buffer.refCnt());
            assertEquals(2, slice.refCnt());
            assertEquals(100, slice.segment().byteSize());
            assertEquals(buffer.segment().address() + 8, slice.segment().address());
            assertEquals(buffer.remoteAddress(8), slice.remoteAddress());
            assertEquals(buffer.key(), slice.key());
            assertEquals(buffer.descriptor(), slice.descriptor());
            assertEquals(0x1000 + buffer.key(), buffer.descriptor());
            assertFalse(buffer.release());
            assertTrue(slice.release(), "the slice's release is the last");
            assertThrows(IllegalStateException.class, buffer::segment);
            assertThrows(IllegalStateException.class, slice::segment);
        }
    }

    @Test
    void encodeInPlaceAndHandOutTheUsedPart() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.PARANOID)) {
            RegisteredBuffer send = allocator.tryAllocate(PoolKind.SEND, 256);
            byte[] payload = "zero copy".getBytes(StandardCharsets.UTF_8);
            MemorySegment segment = send.segment();
            segment.set(ValueLayout.JAVA_INT, 0, payload.length);
            MemorySegment.copy(payload, 0, segment, ValueLayout.JAVA_BYTE, 4, payload.length);
            RegisteredBuffer used = send.slice(0, 4 + payload.length);
            assertEquals(13, used.segment().byteSize());

            RegisteredBuffer message = used.retainedSlice(4, payload.length);
            send.release();
            assertEquals("zero copy", new String(message.segment().toArray(ValueLayout.JAVA_BYTE),
                    StandardCharsets.UTF_8));
            assertTrue(message.release());
        }
    }

    @Test
    void sizeClassesAreAlignedPowersOfTwo() {
        try (RegisteredAllocator allocator = allocator(LeakDetection.DISABLED)) {
            for (int size : new int[] {0, 1, 64, 65, 4096, 4097, 100_000, 1 << 20}) {
                RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, size);
                long capacity = buffer.capacity();
                assertEquals(Math.max(64, Integer.highestOneBit(Math.max(1, size - 1)) * 2L), capacity, "size " + size);
                assertEquals(0, buffer.segment().address() % Math.min(capacity, 4096), "alignment of " + size);
                buffer.release();
            }
        }
        assertEquals(0, SizeClasses.index(1));
        assertEquals(0, SizeClasses.index(64));
        assertEquals(1, SizeClasses.index(65));
        assertEquals(6, SizeClasses.index(4096));
        assertEquals(7, SizeClasses.index(4097));
        assertEquals(5 * (1 << 18), SizeClasses.largeBytes((1 << 20) + 1));
    }
}
