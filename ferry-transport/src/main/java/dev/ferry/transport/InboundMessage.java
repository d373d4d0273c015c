package dev.ferry.transport;

import java.lang.foreign.MemorySegment;

/**
 * A received message: a read-only view of the receive buffer it arrived in. The buffer is
 * the receiver's flow-control capacity: it is reposted (and a credit returned to the sender)
 * only when the message is {@link #release() released}, so a handler that holds messages
 * slows its senders down instead of growing a queue.
 */
public interface InboundMessage {

    /** The stream the sender named. */
    int stream();

    /** The message bytes; valid until {@link #release()}. */
    MemorySegment segment();

    /** Gives the buffer back. Exactly once; using {@link #segment()} afterwards is an error. */
    void release();
}
