/**
 * The transport: ordered, reliable, variable-size messages between processes, on logical
 * streams multiplexed over a bounded set of links per peer.
 *
 * <p>{@link dev.ferry.transport.Transports#open} picks an implementation by
 * {@link dev.ferry.transport.TransportConfig#provider()}: a libfabric provider ({@code shm},
 * {@code tcp}, {@code verbs}, ...) or {@code netty}, the kernel-TCP baseline. Every
 * implementation passes the same behavioural suite and offers the same contract:
 * <ul>
 *   <li>messages on one stream of one peer arrive exactly once and in order;</li>
 *   <li>senders encode into buffers they take from the transport ({@link dev.ferry.transport.Peer#allocate})
 *       and receivers read a view of the receive buffer ({@link dev.ferry.transport.InboundMessage}),
 *       so nothing is copied on the way;</li>
 *   <li>back-pressure is a return value or a future that completes later, never an
 *       unbounded queue: memory is bounded by the send and receive pools.</li>
 * </ul>
 */
package dev.ferry.transport;
