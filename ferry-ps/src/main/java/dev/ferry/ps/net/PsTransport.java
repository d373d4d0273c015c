package dev.ferry.ps.net;

import dev.ferry.transport.TransportConfig;

/**
 * Transport settings for parameter-server traffic, applied to a base configuration.
 *
 * <p>A pull's response is its rows, {@code rows x dimension x 4} bytes: 48 KiB for a part of 190
 * rows of dimension 64, a typical share of one server in a batch of 740 Zipf ids. Under the
 * transport's default eager threshold (16 KiB) most such responses go by rendezvous: the server
 * advertises its buffer, the client's transport thread reads it and sends a release back, so the
 * response costs two extra messages and a read completion on the threads of both processes. With
 * an eager threshold of {@value #EAGER_BYTES} bytes a response of up to 1,023 rows of dimension 64
 * goes in one send into a posted receive buffer; only the largest go by rendezvous.
 *
 * <p>The price is receive memory: every posted buffer is 256 KiB, so a link holds
 * {@code (receiveBuffersPerLink + 2) x 256 KiB}. This configuration posts
 * {@value #RECEIVE_BUFFERS_PER_LINK} buffers per link, which covers the calls one client keeps in
 * flight to one server on a link (one per calling thread and server), and raises the receive pool
 * to at least {@value #MIN_RECEIVE_POOL_BYTES} bytes: 4.5 MiB per link, 12 links at full grant
 * (an eighth of the pool is kept for links that join). Where more links are busy than the pool
 * covers, they share it equally, down to four buffers each, and a link is refused (the dialer is
 * told why) only once fewer than four buffers are left: raise {@code receivePoolBytes} with the
 * number of peers.
 * Requests (ids, and a push's gradients) are unaffected: pushes of more than 256 KiB still go by
 * rendezvous, paced by the receiver as before.
 *
 * <p>The two ends of a link send eagerly up to the smaller of their eager thresholds, agreed when
 * the link opens: a tuned side and one with the transport's defaults still talk, at the defaults'
 * 16 KiB. Tune the servers and every client of them alike to get the larger sends (the benchmarks
 * do); {@code ferry server} and {@link LocalCluster} keep the transport's defaults.
 */
public final class PsTransport {

    /**
     * The eager threshold: a 256 KiB receive buffer (one size class of the registered allocator)
     * less room for the transport's frame header.
     */
    public static final int EAGER_BYTES = (256 << 10) - 64;

    /** Receive buffers, and so credits, per link. */
    public static final int RECEIVE_BUFFERS_PER_LINK = 16;

    /** The least receive pool: room for 12 busy links at {@link #RECEIVE_BUFFERS_PER_LINK} buffers, and newcomers. */
    public static final long MIN_RECEIVE_POOL_BYTES = 64L << 20;

    private PsTransport() {
    }

    /**
     * How long an idle progress thread polls after its 20 us spin: not at all. A server's or
     * client's progress thread that kept polling (yielding) for the transport's default 200 us
     * between requests that come tens of microseconds apart took the cores the handlers and the
     * clients' threads needed: on two cores, fetch on shm cost 67-69 us of layer CPU per fetch
     * with no polling against 73-85 with it, mean and p99 lower too, and a 64 B RPC's p50 the same
     * (the spin covers a ping-pong's turn; docs/fetch-layer.md, sixth round).
     */
    public static final long IDLE_POLL_MICROS = 0;

    /**
     * Messages of at least this many bytes go by reference to a peer process on the same host
     * ({@link TransportConfig#sharedSendBytes}): a pull's response is read by the client where the
     * server gathered it, and a request's ids by the server where the client wrote them, instead
     * of being copied across the processes by the provider. 4 KiB is where libfabric's shm
     * provider stops copying through its ring and has the receiver copy with a system call
     * ({@code process_vm_readv}); below it the ring's copy costs less than holding the buffer for
     * its release. At 16 KiB, 55% of a fetch's answers went by reference (or, above the eager
     * threshold, by rendezvous), at 4 KiB 84%, and shm's fetch took about 10% less time and CPU
     * (docs/fetch-layer.md, eighteenth round).
     */
    public static final long SHARED_SEND_BYTES = 4 << 10;

    /**
     * {@code base} with the eager threshold, receive buffers per link, receive pool, idle polling
     * and sends by reference of this class; every other setting (send windows, other pools,
     * provider, addresses) is kept.
     */
    public static TransportConfig tune(TransportConfig base) {
        TransportConfig c = base.withFlowControl(EAGER_BYTES, RECEIVE_BUFFERS_PER_LINK, base.sendWindowBytesPerLink(),
                base.sendWindowBytesPerPeer(), base.sendWindowBytesPerProcess());
        return c.withPools(c.sendPoolBytes(), Math.max(c.receivePoolBytes(), MIN_RECEIVE_POOL_BYTES),
                c.rendezvousPoolBytes()).withIdlePollMicros(IDLE_POLL_MICROS).withSharedSendBytes(SHARED_SEND_BYTES);
    }
}
