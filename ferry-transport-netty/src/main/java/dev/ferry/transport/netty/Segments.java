package dev.ferry.transport.netty;

import io.netty.buffer.ByteBuf;
import java.lang.foreign.MemorySegment;

/** Views of Netty buffers as memory segments, without copying. */
final class Segments {

    private Segments() {
    }

    /**
     * The {@code length} bytes of {@code buffer} at {@code index}, as a segment over the same
     * memory. With Netty's unsafe access, from the raw address; without it (it is off by default on
     * some newer JDKs), through the buffer's NIO view, which is just as zero-copy.
     */
    static MemorySegment of(ByteBuf buffer, int index, int length) {
        if (buffer.hasMemoryAddress()) {
            return MemorySegment.ofAddress(buffer.memoryAddress() + index).reinterpret(length);
        }
        return MemorySegment.ofBuffer(buffer.nioBuffer(index, length));
    }
}
