/**
 * The transport over libfabric: links (a queue pair, or an address on a shared reliable-datagram
 * endpoint), {@link dev.ferry.transport.fabric.ReceiveCredits receive credits},
 * {@link dev.ferry.transport.fabric.SendWindow the send window}, eager and rendezvous
 * protocols ({@link dev.ferry.transport.fabric.FrameDescriptor}), and the progress thread.
 */
package dev.ferry.transport.fabric;
