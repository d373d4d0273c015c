/**
 * The kernel-TCP transport over Netty: the baseline every benchmark compares against, and the
 * fallback when no fabric is available.
 *
 * <p>It offers exactly the contract of the fabric transport ({@link dev.ferry.transport}):
 * streams multiplexed over at most {@code linksPerPeer} TCP connections per peer, a stream
 * always on the same connection so its order holds; a send window per link, peer and process
 * whose overflow waits inside the transport; receive-side back-pressure that stops reading a
 * connection while the application holds too many of its messages; zero-copy in both
 * directions where Netty allows it. The wire format is drawn in {@link
 * dev.ferry.transport.netty.FrameDescriptor}; every Netty tunable, and why, is in {@link
 * dev.ferry.transport.netty.NettyTuning}.
 */
package dev.ferry.transport.netty;
