package dev.ferry.transport;

import java.lang.foreign.MemorySegment;

/**
 * A send buffer taken from {@link Peer#allocate}: encode into {@link #segment()} and hand it to
 * {@link Peer#send}. A message that is not sent must be {@link #release() released}.
 */
public interface OutboundMessage {

    /**
     * The writable bytes of the message; its size is the message length. Once the transport has
     * closed, the memory is gone: reads and writes through the segment throw
     * {@link IllegalStateException}, also one under way when the close comes.
     */
    MemorySegment segment();

    /** Shrinks the message to its first {@code length} bytes (encoders that over-allocate). */
    void truncate(int length);

    /** Returns the buffer unsent. Not needed after {@link Peer#send}; twice is an error. */
    void release();
}
