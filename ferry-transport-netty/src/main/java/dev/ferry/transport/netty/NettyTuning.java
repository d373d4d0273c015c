package dev.ferry.transport.netty;

import dev.ferry.transport.TransportConfig;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.channel.AdaptiveRecvByteBufAllocator;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.ServerChannelRecvByteBufAllocator;
import io.netty.channel.WriteBufferWaterMark;

/**
 * Every Netty-specific tunable in one place, with the reason for its value: this transport is
 * the baseline the fabric is measured against, so it is tuned the way a competent Netty user
 * would tune a throughput- and latency-sensitive service, not left at defaults.
 *
 * <ul>
 *   <li><b>Native epoll</b> on Linux (NIO elsewhere): fewer syscalls and no selector garbage,
 *       edge-triggered readiness, and writev of the outbound buffers in one call.</li>
 *   <li><b>TCP_NODELAY</b>: small messages must leave now; Nagle plus delayed ACKs adds up to
 *       40 ms to a request/response exchange. Batching is done by us (next point) instead.</li>
 *   <li><b>One flush per event-loop turn</b>: application threads queue messages on the link and
 *       at most one drain task per link is pending; the drain writes everything queued and
 *       flushes once, so a burst from many threads becomes one writev, not one syscall each
 *       (the effect of {@code FlushConsolidationHandler}, without a task per write).</li>
 *   <li><b>Pooled direct allocator</b> ({@link PooledByteBufAllocator}, jemalloc-style, thread
 *       caches): send buffers are encoded in place and written without copy; receive buffers
 *       come from the same pool. Netty 4.2 defaults to the adaptive allocator; we pin the pooled
 *       one, the model of Ferry's own registered-memory allocator, for a like-for-like
 *       comparison.</li>
 *   <li><b>Receive buffer sizes</b> adapt between {@link #READ_MIN} and {@link #READ_MAX}: big
 *       reads for bulk transfers (fewer syscalls), small ones for a trickle. Frames that fit
 *       in one read are passed up as slices of it.</li>
 *   <li><b>Write watermarks</b> at half and all of the per-link send window, so
 *       {@code isWritable} turns false exactly when the link's window is full.</li>
 *   <li><b>SO_SNDBUF / SO_RCVBUF</b> are left to the kernel unless {@link #SOCKET_BUFFER_PROPERTY}
 *       says otherwise: on Linux setting them turns off buffer auto-tuning and caps them at
 *       {@code net.core.[rw]mem_max}, which is usually smaller than what auto-tuning reaches
 *       (several MiB on a fast path). A fixed value is worth setting only on a path whose
 *       bandwidth-delay product is known.</li>
 *   <li><b>SO_BACKLOG</b> {@link #BACKLOG}: many clients may connect at once (incast of connects).</li>
 *   <li><b>Accepts per loop turn</b> {@link #ACCEPTS_PER_TURN}: Netty's server channels take one
 *       connection per turn of their event loop ({@link #acceptAllocator}), and that loop also
 *       serves established links.</li>
 *   <li><b>Event-loop threads</b>: one per core; more only add context switches, and
 *       every link is served by one loop so its order needs no locks.</li>
 * </ul>
 */
final class NettyTuning {

    /** System property: fixed SO_SNDBUF and SO_RCVBUF in bytes; unset or 0 keeps auto-tuning. */
    static final String SOCKET_BUFFER_PROPERTY = "ferry.netty.socketBufferBytes";

    /** System property: event-loop threads per transport; default one per core. */
    static final String THREADS_PROPERTY = "ferry.netty.threads";

    static final int READ_MIN = 1024;
    static final int READ_INITIAL = 16 * 1024;
    static final int READ_MAX = 256 * 1024;
    static final int BACKLOG = 1024;
    static final int ACCEPTS_PER_TURN = 64;

    private NettyTuning() {
    }

    /**
     * Netty's pooled allocator with its default arenas and cache sizes, but with thread caches for
     * every thread, not only Netty's own: here the application threads allocate the send buffers,
     * and without a cache each allocation takes an arena lock. With 64 sending threads on two
     * cores that lock (unfair) starved some senders for whole seconds.
     */
    private static final PooledByteBufAllocator ALLOCATOR = new PooledByteBufAllocator(true,
            PooledByteBufAllocator.defaultNumHeapArena(), PooledByteBufAllocator.defaultNumDirectArena(),
            PooledByteBufAllocator.defaultPageSize(), PooledByteBufAllocator.defaultMaxOrder(),
            PooledByteBufAllocator.defaultSmallCacheSize(), PooledByteBufAllocator.defaultNormalCacheSize(), true);

    static ByteBufAllocator allocator() {
        return ALLOCATOR;
    }

    /**
     * The listening socket's "allocator": up to {@link #ACCEPTS_PER_TURN} accepts per turn of its
     * event loop, until the backlog is empty. Netty's default stops after one: it continues only
     * while the last read returned what it attempted, and an accept "reads" a descriptor number
     * against an attempt of 1. The listening socket shares its loop with established links, so one
     * accept per turn of a loop busy with their data let 64 concurrent connects wait over a second.
     */
    static RecvByteBufAllocator acceptAllocator() {
        ServerChannelRecvByteBufAllocator accepts = new ServerChannelRecvByteBufAllocator();
        accepts.maxMessagesPerRead(ACCEPTS_PER_TURN);
        accepts.respectMaybeMoreData(false);
        return accepts;
    }

    static RecvByteBufAllocator receiveAllocator() {
        return new AdaptiveRecvByteBufAllocator(READ_MIN, READ_INITIAL, READ_MAX);
    }

    static WriteBufferWaterMark waterMark(TransportConfig config) {
        int high = (int) Math.min(Integer.MAX_VALUE, config.sendWindowBytesPerLink());
        return new WriteBufferWaterMark(Math.max(1, high / 2), high);
    }

    static int socketBufferBytes() {
        return Integer.getInteger(SOCKET_BUFFER_PROPERTY, 0);
    }

    static int threads() {
        return Math.max(1, Integer.getInteger(THREADS_PROPERTY, Runtime.getRuntime().availableProcessors()));
    }

    /**
     * Frames one link may hand the application before it stops reading: one per receive
     * buffer of the fabric transport, so the application sees the same bound.
     */
    static int heldFramesPerLink(TransportConfig config) {
        return config.receiveBuffersPerLink();
    }

    /**
     * Payload bytes one link may hand the application before it stops reading: what its receive
     * buffers would hold, but no more than the receive pool. One larger message still passes.
     */
    static long heldBytesPerLink(TransportConfig config) {
        return Math.min((long) config.receiveBuffersPerLink() * config.eagerThreshold(), config.receivePoolBytes());
    }
}
