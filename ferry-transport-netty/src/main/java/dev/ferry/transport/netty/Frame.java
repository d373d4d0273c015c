package dev.ferry.transport.netty;

import io.netty.buffer.ByteBuf;

/**
 * One decoded frame, as {@link FrameDecoder} passes it up the pipeline. The payload is a
 * retained slice of the read buffer (or, for a frame that spanned reads, a buffer of exactly
 * its size); whoever takes the frame owns one reference.
 *
 * @param type a {@code FrameDescriptor.TYPE_*}
 * @param stream the stream id, or the link index of a HELLO
 * @param payload the payload bytes, readable from its reader index
 */
record Frame(byte type, int stream, ByteBuf payload) {
}
