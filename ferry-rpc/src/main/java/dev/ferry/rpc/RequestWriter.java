package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;

/**
 * Encodes a request body straight into the transport's registered send buffer. It is called
 * once per attempt: again, into a fresh buffer, when the call is resent after a failure, so
 * it must write the same bytes every time (and must not block).
 */
@FunctionalInterface
public interface RequestWriter {

    /** Writes the body into {@code body}, whose size is the length the call asked for. */
    void write(MemorySegment body);
}
