package dev.ferry.transport.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * Fuzzes the fabric frame header, the rendezvous request, the reference to a shared slab and a
 * batch of releases as the progress thread reads them
 * from a receive buffer: {@link FrameDescriptor#validate} must name a problem or pass a frame
 * whose fields are all within their limits, and must read nothing past the received bytes (the
 * frame is a native segment of exactly that size, so such a read throws).
 */
class FrameDescriptorFuzzTest {

    static final int EAGER_THRESHOLD = 8192;
    static final long MAX_MESSAGE = 1L << 30;
    private static final MemorySegment BUFFER = Arena.global().allocate(1 << 16, 64);

    @FuzzTest
    void frame(byte[] data) {
        MemorySegment frame = data.length <= BUFFER.byteSize()
                ? BUFFER.asSlice(0, data.length).copyFrom(MemorySegment.ofArray(data))
                : Arena.ofAuto().allocate(data.length).copyFrom(MemorySegment.ofArray(data));
        long received = data.length;
        String problem = FrameDescriptor.validate(frame, received, EAGER_THRESHOLD, MAX_MESSAGE);
        if (problem != null) {
            assertTrue(!problem.isEmpty());
            return;
        }
        // Well formed: every field the progress thread goes on to read is in range.
        assertTrue(received >= FrameDescriptor.HEADER);
        assertEquals(FrameDescriptor.VERSION, FrameDescriptor.version(frame));
        int credits = FrameDescriptor.credits(frame);
        assertTrue(credits >= 0 && credits <= FrameDescriptor.MAX_CREDITS);
        FrameDescriptor.link(frame);
        FrameDescriptor.stream(frame);
        long length = FrameDescriptor.length(frame);
        long cookie = FrameDescriptor.cookie(frame);
        switch (FrameDescriptor.type(frame)) {
            case FrameDescriptor.EAGER -> {
                assertTrue(length >= 0 && length <= EAGER_THRESHOLD);
                assertEquals(received, FrameDescriptor.HEADER + length);
                assertEquals(length, frame.asSlice(FrameDescriptor.HEADER, length).byteSize());
            }
            case FrameDescriptor.RNDV_REQ -> {
                assertEquals(FrameDescriptor.RNDV_REQ_BYTES, received);
                assertTrue(length > 0 && length <= MAX_MESSAGE);
                FrameDescriptor.remoteAddress(frame);
                FrameDescriptor.remoteKey(frame);
            }
            case FrameDescriptor.RNDV_SHARED -> {
                assertEquals(FrameDescriptor.RNDV_REQ_BYTES, received);
                assertTrue(length > 0 && length <= MAX_MESSAGE);
                FrameDescriptor.sharedSlab(frame);
                FrameDescriptor.sharedFd(frame);
                FrameDescriptor.remoteAddress(frame); // the offset: PeerMemory checks it against the slab
            }
            case FrameDescriptor.RELEASES -> {
                assertTrue(length >= 1 && length <= PendingReleases.CAPACITY);
                assertEquals(FrameDescriptor.HEADER + 8 * length, received);
                for (int i = 0; i < length; i++) {
                    FrameDescriptor.released(frame, i); // every cookie within the received bytes
                }
            }
            case FrameDescriptor.RNDV_DONE, FrameDescriptor.CREDIT -> assertEquals(FrameDescriptor.HEADER, received);
            case FrameDescriptor.RECLAIM, FrameDescriptor.YIELD -> {
                assertEquals(FrameDescriptor.HEADER, received);
                assertTrue(cookie >= 0 && cookie <= FrameDescriptor.MAX_CREDITS);
            }
            default -> throw new AssertionError("passed a frame of unknown type " + FrameDescriptor.type(frame));
        }
    }
}
