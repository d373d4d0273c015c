/**
 * The in-JVM transport, provider {@code local}: the transport contract of {@link dev.ferry.transport}
 * between transports of one JVM, with no socket and no fabric, so that the layers above (RPC,
 * the parameter server) can be tested hermetically and measured without any network cost.
 *
 * <p>It keeps the contract's bounds rather than shortcutting them: a send buffer comes from the
 * sender's bounded send pool ({@link dev.ferry.memory.RegisteredAllocator}, no registration) and
 * is handed to the receiver as it is (zero-copy: the receiver's view is the sender's buffer,
 * returned to the sender's pool when the receiver releases it); a sender holds one receive credit
 * per message the receiver has not yet released, {@code receiveBuffersPerLink} per link; send
 * windows per link, peer and process cap the bytes sent and not yet handed to the receiver, and
 * work beyond them waits in the link's queue. Each transport has one dispatch thread that
 * calls its {@link dev.ferry.transport.MessageHandler}, in order per link.
 *
 * <p>Addresses are {@code local:<n>} ({@code n} is {@code bindPort} when it is not 0) and are
 * known to the transports of this JVM only.
 */
package dev.ferry.transport.local;
