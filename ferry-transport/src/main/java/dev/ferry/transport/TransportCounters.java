package dev.ferry.transport;

/**
 * A snapshot of a transport's counters. Totals count since the transport opened; the
 * {@code current*} and {@code peak*} fields describe the moment of the snapshot.
 *
 * @param linksOpen links (queue pairs or connections) open now
 * @param messagesSent messages whose send completed
 * @param messagesReceived messages delivered to the handler
 * @param bytesSent payload bytes of the messages sent
 * @param bytesReceived payload bytes of the messages delivered
 * @param eagerSent messages sent eagerly (one send each)
 * @param rendezvousSent messages sent by rendezvous: pulled by the receiver, or read in place by a
 *     receiver on the same host that maps the sender's send memory
 *     ({@link TransportConfig#sharedSendBytes()})
 * @param creditsAvailable send credits held now, summed over links
 * @param creditStalls times a send waited for a receive credit
 * @param windowStalls times a send waited for room in a send window
 * @param bytesInFlight bytes sent or advertised and not yet completed, now
 * @param peakBytesInFlight the largest {@code bytesInFlight} seen
 * @param reposts receive buffers reposted after the application released them
 * @param receiveBuffersHeld receive buffers the application holds now (not yet released)
 * @param linkFailures links closed by an error or a bad frame
 * @param creditsGranted receive credits granted to busy peers beyond their first grant, from a
 *     receive queue shared by all peers
 * @param creditsReclaimed receive credits taken back from idle peers, to grant to busy ones
 * @param authenticationFailures peers refused because they could not prove the shared secret
 * @param creditFramesSent frames sent only to return receive credits (no other frame to ride on);
 *     a rate near the message rate on idle links means credits are being traded, not used
 */
public record TransportCounters(
        int linksOpen,
        long messagesSent,
        long messagesReceived,
        long bytesSent,
        long bytesReceived,
        long eagerSent,
        long rendezvousSent,
        long creditsAvailable,
        long creditStalls,
        long windowStalls,
        long bytesInFlight,
        long peakBytesInFlight,
        long reposts,
        long receiveBuffersHeld,
        long linkFailures,
        long creditsGranted,
        long creditsReclaimed,
        long authenticationFailures,
        long creditFramesSent) {
}
