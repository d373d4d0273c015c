package dev.ferry.transport;

import java.util.Objects;

/**
 * Every tunable of a transport, with its default and the reason for it. Start from
 * {@link #defaults(String)} and change what you need with the {@code with*} methods.
 *
 * @param provider which transport: a libfabric provider ({@code shm}, {@code tcp}, {@code verbs},
 *     {@code efa}, ...) or {@code netty} for kernel TCP
 * @param bindHost the host this transport listens on; loopback by default, since the bootstrap
 *     port must not be exposed by accident
 * @param bindPort the bootstrap port; 0 picks a free one
 * @param linksPerPeer links opened to one peer at most; all its streams share them. 2 lets a
 *     large transfer use one link while small messages pass on the other, without the
 *     queue-pair count growing with threads
 * @param maxLinks links in the whole process at most; NIC caches thrash past a few thousand
 *     queue pairs, and every link holds receive buffers
 * @param eagerThreshold messages up to this many bytes go in one send; larger ones go by
 *     rendezvous (the receiver pulls them with an RDMA read). 16 KiB is where a copy into a
 *     posted buffer starts to cost more than one extra round trip on RDMA fabrics
 * @param receiveBuffersPerLink receive buffers posted per link, each worth one credit to the
 *     sender; 64 covers a round trip of small messages at full rate without much memory
 * @param sendWindowBytesPerLink bytes in flight per link at most
 * @param sendWindowBytesPerPeer bytes in flight per peer at most
 * @param sendWindowBytesPerProcess bytes in flight in the process at most; this caps what the
 *     process can dump into the fabric at once (incast), whatever the number of peers
 * @param sendPoolBytes registered memory for send buffers
 * @param receivePoolBytes registered memory for receive buffers, shared by all links
 * @param rendezvousPoolBytes registered memory that receivers pull large messages into
 * @param rendezvousChunkBytes a rendezvous pull is split into reads of this size, so a large
 *     message delays small ones on the same link by one chunk at most
 * @param maxMessageSize the largest message accepted; anything larger is refused as bad input
 * @param connectTimeoutMillis how long {@link Transport#connect} and a blocking allocate wait
 * @param heartbeatIntervalMillis how often each side of a control channel says it is alive when
 *     it has said nothing else; a heartbeat is a byte on the peer's TCP control connection, so
 *     failure detection does not depend on the data path
 * @param heartbeatTimeoutMillis a peer silent on its control channel this long is declared
 *     failed. Several intervals, and long enough that a full GC pause on either side is not
 *     taken for a death; a killed process is noticed at once anyway (its socket closes)
 * @param secret the key peers must prove they hold, with an HMAC challenge on the control
 *     channel, before they learn this side's fabric address or get a link; null accepts any
 *     peer, which only a demo on one machine should do
 * @param idlePollMicros how long a transport's progress thread keeps polling after its last work
 *     before it sleeps, while work comes in dense bursts (its idle stretches average less than
 *     this). 200 us lets a request-response exchange at a high rate pay no wake-up while a
 *     process serving requests a few hundred microseconds apart sleeps between them; raise it
 *     for streams of small messages (2,000 us gave tcp 64 B streams a third more messages a
 *     second here), lower it to save CPU. 0 sleeps after a short spin always
 * @param pullBudgetBytes receiver-driven pacing of rendezvous transfers: the bytes this receiver's
 *     reads may have in flight at once across all its senders while more than one message has
 *     reads in flight (such a read is cut to half the budget, chunks go to the message with the
 *     fewest bytes left, one in eight to the oldest, one read always proceeds); a message is
 *     pulled whole, in reads of {@code rendezvousChunkBytes} and a last one of half the budget,
 *     once the other messages' reads in flight are down to half the budget, since one sender's
 *     bytes arrive no faster than its link (where senders' links are faster than the receiver's,
 *     lower {@code rendezvousChunkBytes} too). Incoming bulk
 *     data then never puts more than this on the path at once, so a shallow switch buffer in front
 *     of the receiver does not overflow when many senders push to it together (incast). Size it
 *     from the link with {@link #pullBudgetFor}: the bandwidth-delay product plus a margin the
 *     switch buffer absorbs. 0 (the default) sets no budget beyond 16 reads of
 *     {@code rendezvousChunkBytes} in flight: nothing changes where the network has no shallow
 *     buffer (loopback, shm, a deep-buffered fabric)
 * @param handshakeTimeoutMillis how long a connection to a listening port (control channel,
 *     Netty port) has to prove the shared secret, for the whole handshake and not per read: a
 *     silent or trickling peer is closed when it passes. A good client needs a few round trips;
 *     2 s covers a GC pause on either side while a flood of slow connections stays cheap
 * @param sharedSendBytes messages of at least this many bytes to a peer process on the same host
 *     go by reference, where both sides can: the send pool is shared memory ({@code memfd}) that
 *     the peer maps read-only once it proved, at the handshake, that it may open this process's
 *     files (the kernel's check for that is the one it makes before a cross-process copy, which
 *     shm's provider does anyway). The peer reads the message where the sender built it, and
 *     releases it as it releases a rendezvous: no copy between the processes, and the sender's
 *     buffer is held until the receiver has done with the message. 0 (the default) never;
 *     messages from application memory (not the send pool) always go through the provider
 */
public record TransportConfig(
        String provider,
        String bindHost,
        int bindPort,
        int linksPerPeer,
        int maxLinks,
        int eagerThreshold,
        int receiveBuffersPerLink,
        long sendWindowBytesPerLink,
        long sendWindowBytesPerPeer,
        long sendWindowBytesPerProcess,
        long sendPoolBytes,
        long receivePoolBytes,
        long rendezvousPoolBytes,
        int rendezvousChunkBytes,
        int maxMessageSize,
        long connectTimeoutMillis,
        long heartbeatIntervalMillis,
        long heartbeatTimeoutMillis,
        SharedSecret secret,
        long idlePollMicros,
        long pullBudgetBytes,
        long handshakeTimeoutMillis,
        long sharedSendBytes) {

    /** Checks the settings against each other. */
    public TransportConfig {
        Objects.requireNonNull(provider, "provider");
        Objects.requireNonNull(bindHost, "bindHost");
        positive("linksPerPeer", linksPerPeer);
        positive("maxLinks", maxLinks);
        positive("receiveBuffersPerLink", receiveBuffersPerLink);
        positive("eagerThreshold", eagerThreshold);
        positive("rendezvousChunkBytes", rendezvousChunkBytes);
        positive("maxMessageSize", maxMessageSize);
        if (sendWindowBytesPerLink <= 0 || sendWindowBytesPerPeer < sendWindowBytesPerLink
                || sendWindowBytesPerProcess < sendWindowBytesPerPeer) {
            throw new IllegalArgumentException("send windows must be positive and grow from link to peer to process: "
                    + sendWindowBytesPerLink + ", " + sendWindowBytesPerPeer + ", " + sendWindowBytesPerProcess);
        }
        if (sendPoolBytes <= 0 || receivePoolBytes <= 0 || rendezvousPoolBytes <= 0) {
            throw new IllegalArgumentException("pool sizes must be positive");
        }
        positive("heartbeatIntervalMillis", heartbeatIntervalMillis);
        if (heartbeatTimeoutMillis < 2 * heartbeatIntervalMillis) {
            throw new IllegalArgumentException("heartbeatTimeoutMillis " + heartbeatTimeoutMillis
                    + " must cover at least two heartbeats of " + heartbeatIntervalMillis + " ms");
        }
        if (pullBudgetBytes < 0) {
            throw new IllegalArgumentException("pullBudgetBytes must not be negative: " + pullBudgetBytes);
        }
        if (idlePollMicros < 0) {
            throw new IllegalArgumentException("idlePollMicros must not be negative: " + idlePollMicros);
        }
        positive("handshakeTimeoutMillis", handshakeTimeoutMillis);
        if (sharedSendBytes < 0) {
            throw new IllegalArgumentException("sharedSendBytes must not be negative: " + sharedSendBytes);
        }
        if (bindPort < 0 || bindPort > 65535) {
            throw new IllegalArgumentException("bindPort out of range: " + bindPort);
        }
    }

    /**
     * The settings above with the default heartbeat (every second, failed after 5 s of silence),
     * no secret, the default idle polling (200 us), no pull budget and the default handshake
     * deadline (2 s).
     */
    public TransportConfig(String provider, String bindHost, int bindPort, int linksPerPeer, int maxLinks,
            int eagerThreshold, int receiveBuffersPerLink, long sendWindowBytesPerLink, long sendWindowBytesPerPeer,
            long sendWindowBytesPerProcess, long sendPoolBytes, long receivePoolBytes, long rendezvousPoolBytes,
            int rendezvousChunkBytes, int maxMessageSize, long connectTimeoutMillis) {
        this(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold, receiveBuffersPerLink,
                sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess, sendPoolBytes,
                receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize, connectTimeoutMillis,
                1_000, 5_000, null, 200, 0, 2_000, 0);
    }

    private static void positive(String name, long value) {
        if (value <= 0) {
            throw new IllegalArgumentException(name + " must be positive: " + value);
        }
    }

    /** The defaults for {@code provider}. */
    public static TransportConfig defaults(String provider) {
        return new TransportConfig(provider, "127.0.0.1", 0,
                2, 4096, 16 * 1024, 64,
                4L << 20, 8L << 20, 64L << 20,
                64L << 20, 32L << 20, 256L << 20,
                1 << 20, 256 << 20, 10_000, 1_000, 5_000, null, 200, 0, 2_000, 0);
    }

    /** This configuration with another provider. */
    public TransportConfig withProvider(String value) {
        return new TransportConfig(value, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration listening on another port. */
    public TransportConfig withBindPort(int value) {
        return new TransportConfig(provider, bindHost, value, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with other link counts. */
    public TransportConfig withLinks(int perPeer, int max) {
        return new TransportConfig(provider, bindHost, bindPort, perPeer, max, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with other flow-control settings. */
    public TransportConfig withFlowControl(int eager, int buffersPerLink, long windowPerLink, long windowPerPeer,
            long windowPerProcess) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eager,
                buffersPerLink, windowPerLink, windowPerPeer, windowPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with other pool sizes. */
    public TransportConfig withPools(long send, long receive, long rendezvous) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                send, receive, rendezvous, rendezvousChunkBytes, maxMessageSize, connectTimeoutMillis,
                heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with another connect and allocate timeout. */
    public TransportConfig withConnectTimeoutMillis(long value) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize, value,
                heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with another heartbeat on the control channel. */
    public TransportConfig withHeartbeat(long intervalMillis, long timeoutMillis) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, intervalMillis, timeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with peers authenticated by {@code value} (null: no authentication). */
    public TransportConfig withSecret(SharedSecret value) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, value, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration listening on another host. */
    public TransportConfig withBindHost(String value) {
        return new TransportConfig(provider, value, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /**
     * A pull budget for a link of {@code bitsPerSecond} with a round trip of {@code rttMicros}
     * in front of a switch port of {@code portBufferBytes}: the bandwidth-delay product plus a
     * margin of three quarters of the port buffer (reads in flight beyond the BDP queue there),
     * at least 64 KiB so that reads stay large enough to keep the link busy.
     */
    public static long pullBudgetFor(long bitsPerSecond, long rttMicros, long portBufferBytes) {
        long bdp = bitsPerSecond / 8 * rttMicros / 1_000_000;
        return Math.max(64 * 1024, bdp + portBufferBytes * 3 / 4);
    }

    /** This configuration with a pull budget of {@code bytes} (0: none); see {@link #pullBudgetBytes()}. */
    public TransportConfig withPullBudgetBytes(long bytes) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros, bytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with another idle polling time of the progress thread. */
    public TransportConfig withIdlePollMicros(long value) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, value, pullBudgetBytes,
                handshakeTimeoutMillis, sharedSendBytes);
    }

    /** This configuration with another deadline for the handshake of an incoming connection. */
    public TransportConfig withHandshakeTimeoutMillis(long value) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros,
                pullBudgetBytes, value, sharedSendBytes);
    }

    /** This configuration sending messages of at least {@code bytes} by reference to peers on this host (0: never). */
    public TransportConfig withSharedSendBytes(long bytes) {
        return new TransportConfig(provider, bindHost, bindPort, linksPerPeer, maxLinks, eagerThreshold,
                receiveBuffersPerLink, sendWindowBytesPerLink, sendWindowBytesPerPeer, sendWindowBytesPerProcess,
                sendPoolBytes, receivePoolBytes, rendezvousPoolBytes, rendezvousChunkBytes, maxMessageSize,
                connectTimeoutMillis, heartbeatIntervalMillis, heartbeatTimeoutMillis, secret, idlePollMicros,
                pullBudgetBytes, handshakeTimeoutMillis, bytes);
    }
}
