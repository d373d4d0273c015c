package dev.ferry.transport.netty;

import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.ProgressNice;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.admission.DropLog;
import dev.ferry.transport.admission.HandshakeGate;
import dev.ferry.transport.flow.ByteWindow;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutor;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import dev.ferry.transport.TransportException.Reason;

/**
 * The kernel-TCP transport: a listening socket, the peers known by their listen addresses, and
 * the process-wide limits (send pool, send window, link count). See the package description.
 */
final class NettyTransport implements Transport {

    private static final System.Logger LOG = System.getLogger(NettyTransport.class.getName());
    private static final long ALLOCATE_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    private final TransportConfig config;
    private final MessageHandler handler;
    private final EventLoopGroup group;
    private final Class<? extends SocketChannel> socketClass;
    private final ByteBufAllocator allocator = NettyTuning.allocator();
    private final Channel serverChannel;
    private final String localAddress;
    private final ConcurrentHashMap<String, NettyPeer> peers = new ConcurrentHashMap<>();
    private final Set<Channel> channels = ConcurrentHashMap.newKeySet();
    /** Links with a connection, for the credit count. */
    final Set<NettyLink> attachedLinks = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();

    final ByteWindow window;
    private final ByteWindow sendPool;
    private final ReentrantLock sendPoolLock = new ReentrantLock();
    private final Condition sendPoolFreed = sendPoolLock.newCondition();
    private final AtomicInteger sendPoolWaiters = new AtomicInteger();
    private final AtomicInteger links = new AtomicInteger();
    private final ConcurrentLinkedQueue<NettyLink> stalledLinks = new ConcurrentLinkedQueue<>();

    private final AtomicInteger linksOpen = new AtomicInteger();
    private final LongAdder messagesSent = new LongAdder();
    private final LongAdder bytesSent = new LongAdder();
    private final LongAdder messagesReceived = new LongAdder();
    private final LongAdder bytesReceived = new LongAdder();
    private final LongAdder reposts = new LongAdder();
    private final AtomicLong receiveBuffersHeld = new AtomicLong();
    final LongAdder windowStalls = new LongAdder();
    final LongAdder creditStalls = new LongAdder();
    final LongAdder linkFailures = new LongAdder();
    final LongAdder authenticationFailures = new LongAdder();
    /** Admission of accepted connections until they authenticate. */
    private final HandshakeGate gate;

    NettyTransport(TransportConfig config, MessageHandler handler) {
        int nice = ProgressNice.requested(); // a bad value is refused before anything is opened
        this.config = config;
        this.handler = handler;
        this.window = new ByteWindow(config.sendWindowBytesPerProcess());
        this.sendPool = new ByteWindow(config.sendPoolBytes());
        this.gate = new HandshakeGate(new DropLog(LOG, "netty port " + config.bindHost()),
                config.handshakeTimeoutMillis(), 0, 0);
        boolean epoll = Epoll.isAvailable();
        IoHandlerFactory io = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        Class<? extends ServerChannel> serverClass = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        this.socketClass = epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        this.group = new MultiThreadIoEventLoopGroup(NettyTuning.threads(),
                eventLoopThreads(nice), io);
        try {
            ServerBootstrap server = new ServerBootstrap()
                    .group(group)
                    .channel(serverClass)
                    .option(ChannelOption.SO_BACKLOG, NettyTuning.BACKLOG)
                    .option(ChannelOption.SO_REUSEADDR, true)
                    .option(ChannelOption.RECVBUF_ALLOCATOR, NettyTuning.acceptAllocator())
                    .childHandler(initializer(null));
            childOptions(server);
            this.serverChannel = server.bind(config.bindHost(), config.bindPort()).sync().channel();
        } catch (Exception e) {
            group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            throw new TransportException(Reason.UNAVAILABLE, "cannot listen on " + config.bindHost() + ":" + config.bindPort(), e);
        }
        InetSocketAddress bound = (InetSocketAddress) serverChannel.localAddress();
        this.localAddress = config.bindHost() + ":" + bound.getPort();
        LOG.log(System.Logger.Level.DEBUG, "netty transport listening on " + localAddress
                + (epoll ? " (epoll)" : " (nio)"));
    }

    private void childOptions(ServerBootstrap server) {
        server.childOption(ChannelOption.TCP_NODELAY, true)
                .childOption(ChannelOption.ALLOCATOR, allocator)
                .childOption(ChannelOption.RECVBUF_ALLOCATOR, NettyTuning.receiveAllocator())
                .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, NettyTuning.waterMark(config));
        int socketBuffer = NettyTuning.socketBufferBytes();
        if (socketBuffer > 0) {
            server.childOption(ChannelOption.SO_SNDBUF, socketBuffer).childOption(ChannelOption.SO_RCVBUF, socketBuffer);
        }
    }

    private Bootstrap clientBootstrap(EventLoop loop, NettyLink link) {
        Bootstrap client = new Bootstrap()
                .group(loop)
                .channel(socketClass)
                .option(ChannelOption.TCP_NODELAY, true)
                .option(ChannelOption.ALLOCATOR, allocator)
                .option(ChannelOption.RECVBUF_ALLOCATOR, NettyTuning.receiveAllocator())
                .option(ChannelOption.WRITE_BUFFER_WATER_MARK, NettyTuning.waterMark(config))
                .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.min(Integer.MAX_VALUE, config.connectTimeoutMillis()))
                .handler(initializer(link));
        int socketBuffer = NettyTuning.socketBufferBytes();
        if (socketBuffer > 0) {
            client.option(ChannelOption.SO_SNDBUF, socketBuffer).option(ChannelOption.SO_RCVBUF, socketBuffer);
        }
        return client;
    }

    private ChannelInitializer<Channel> initializer(NettyLink link) {
        return new ChannelInitializer<>() {
            @Override
            protected void initChannel(Channel ch) {
                FrameDecoder decoder = new FrameDecoder(config.maxMessageSize(), false);
                ch.pipeline().addLast("frames", decoder).addLast("link", new LinkHandler(NettyTransport.this, decoder, link));
            }
        };
    }

    TransportConfig config() {
        return config;
    }

    MessageHandler handler() {
        return handler;
    }

    HandshakeGate gate() {
        return gate;
    }

    boolean isClosed() {
        return closed.get();
    }

    @Override
    public String localAddress() {
        return localAddress;
    }

    @Override
    public Peer connect(String address) {
        if (closed.get()) {
            throw new TransportException(Reason.CLOSED, "transport " + localAddress + " is closed");
        }
        parse(address);
        NettyPeer peer = peers.computeIfAbsent(address, a -> new NettyPeer(this, a));
        boolean first = !peer.isEstablished();
        NettyLink link = peer.anyLink();
        try {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.connectTimeoutMillis());
            link.connected.get(config.connectTimeoutMillis(), TimeUnit.MILLISECONDS);
            if (first) {
                for (NettyLink other : peer.openRemaining()) {
                    other.connected.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                }
            }
            return peer;
        } catch (TimeoutException e) {
            TransportException failure = new TransportException(Reason.TIMEOUT, "connect to " + address + " timed out after "
                    + config.connectTimeoutMillis() + " ms");
            peer.fail(failure, false);
            throw failure;
        } catch (ExecutionException e) {
            if (e.getCause() instanceof UnauthenticatedException refused) {
                throw new UnauthenticatedException(refused.getMessage());
            }
            throw new TransportException(Reason.UNREACHABLE, "cannot connect to " + address + ": " + e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while connecting to " + address, e);
        }
    }

    private static InetSocketAddress parse(String address) {
        int colon = address.lastIndexOf(':');
        if (colon <= 0) {
            throw new TransportException(Reason.BAD_INPUT, "not a host:port address: " + address);
        }
        String host = address.substring(0, colon);
        if (host.startsWith("[") && host.endsWith("]")) {
            host = host.substring(1, host.length() - 1);
        }
        try {
            return InetSocketAddress.createUnresolved(host, Integer.parseInt(address.substring(colon + 1)));
        } catch (IllegalArgumentException e) {
            throw new TransportException(Reason.BAD_INPUT, "not a host:port address: " + address, e);
        }
    }

    /** Opens link {@code index} to {@code peer} in the background; sends queue until it is up. */
    NettyLink connectLink(NettyPeer peer, int index) {
        EventLoop loop = group.next();
        NettyLink link = new NettyLink(this, peer, index, loop);
        InetSocketAddress remote = parse(peer.address());
        ChannelFuture connect = clientBootstrap(loop, link).connect(remote.getHostString(), remote.getPort());
        connect.addListener(f -> {
            if (!f.isSuccess()) {
                linkFailures.increment();
                peer.fail(new TransportException(Reason.UNREACHABLE, "cannot connect to " + peer.address() + ": " + f.cause(), f.cause()),
                        peer.isEstablished());
            }
        });
        return link;
    }

    /**
     * A connector proved the secret: file the channel under the peer at the listen address it
     * named. Never before: the address is a claim, the proof is what makes it the peer.
     */
    NettyLink accept(String address, int index, Channel channel, FrameDecoder decoder) {
        if (closed.get() || !reserveLink()) {
            throw new TransportException(closed.get() ? Reason.CLOSED : Reason.LIMIT_REACHED, closed.get() ? "transport closed" : "refusing a link from " + address
                    + ": the process has " + config.maxLinks() + " links (maxLinks)");
        }
        NettyPeer peer = peers.computeIfAbsent(address, a -> new NettyPeer(this, a));
        NettyLink link = new NettyLink(this, peer, index, channel.eventLoop());
        link.attach(channel, decoder);
        if (!peer.adopt(link)) {
            link.fail(new TransportException(Reason.PEER_FAILED, "peer " + address + " failed while it connected"));
        }
        return link;
    }

    boolean reserveLink() {
        while (true) {
            int current = links.get();
            if (current >= config.maxLinks()) {
                return false;
            }
            if (links.compareAndSet(current, current + 1)) {
                return true;
            }
        }
    }

    void releaseLink() {
        links.decrementAndGet();
    }

    void forget(NettyPeer peer) {
        peers.remove(peer.address(), peer);
    }

    void notifyClosed(NettyPeer peer, Throwable cause) {
        try {
            handler.onPeerClosed(peer, cause);
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.WARNING, "message handler failed on the close of " + peer.address(), e);
        }
    }

    void onChannelActive(Channel channel) {
        channels.add(channel);
        linksOpen.incrementAndGet();
        if (closed.get()) {
            channel.close();
        }
    }

    void onChannelInactive(Channel channel) {
        if (channels.remove(channel)) {
            linksOpen.decrementAndGet();
        }
    }

    /** Takes a send buffer, waiting (if {@code wait}) up to the connect timeout for the pool. */
    OutboundMessage allocate(NettyPeer peer, int length, boolean wait) {
        if (length < 0 || length > config.maxMessageSize()) {
            throw new TransportException(Reason.BAD_INPUT, "message of " + length + " bytes: the limit is " + config.maxMessageSize()
                    + " (maxMessageSize)");
        }
        long bytes = (long) FrameDescriptor.HEADER_LENGTH + length;
        if (!sendPool.tryAcquire(bytes)) {
            if (!wait) {
                return null;
            }
            awaitSendPool(peer, bytes);
        }
        ByteBuf buffer;
        try {
            buffer = allocator.directBuffer((int) bytes, (int) bytes);
        } catch (OutOfMemoryError e) {
            releaseSendPool(bytes);
            throw new TransportException(Reason.POOL_EXHAUSTED, "cannot allocate a send buffer of " + bytes + " bytes", e);
        }
        return new NettyOutboundMessage(this, buffer, length, bytes);
    }

    private void awaitSendPool(NettyPeer peer, long bytes) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(config.connectTimeoutMillis());
        sendPoolWaiters.incrementAndGet();
        sendPoolLock.lock();
        try {
            while (!sendPool.tryAcquire(bytes)) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new TransportException(Reason.POOL_EXHAUSTED, "send pool exhausted: no " + bytes + " bytes of "
                            + config.sendPoolBytes() + " (sendPoolBytes) came free within "
                            + config.connectTimeoutMillis() + " ms");
                }
                if (!peer.isOpen()) {
                    throw new TransportException(Reason.PEER_FAILED, "peer " + peer.address() + " failed while waiting for a send buffer",
                            peer.failure());
                }
                sendPoolFreed.awaitNanos(Math.min(left, ALLOCATE_POLL_NANOS));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while waiting for a send buffer", e);
        } finally {
            sendPoolLock.unlock();
            sendPoolWaiters.decrementAndGet();
        }
    }

    void releaseSendPool(long bytes) {
        sendPool.release(bytes);
        if (sendPoolWaiters.get() > 0) {
            sendPoolLock.lock();
            try {
                sendPoolFreed.signalAll();
            } finally {
                sendPoolLock.unlock();
            }
        }
    }

    /** {@code link} stopped at a message the windows did not admit; wake it when they might. */
    void registerStalled(NettyLink link) {
        if (link.stalled.compareAndSet(false, true)) {
            stalledLinks.add(link);
        }
    }

    void wakeStalled() {
        NettyLink link;
        while ((link = stalledLinks.poll()) != null) {
            link.stalled.set(false);
            link.scheduleDrain();
        }
    }

    void onSent(int length) {
        messagesSent.increment();
        bytesSent.add(length);
    }

    void onReceived(int length) {
        messagesReceived.increment();
        bytesReceived.add(length);
        receiveBuffersHeld.incrementAndGet();
    }

    void onReleased() {
        receiveBuffersHeld.decrementAndGet();
        reposts.increment();
    }

    @Override
    public String provider() {
        return "netty";
    }

    /**
     * {@inheritDoc}
     *
     * <p>In TCP terms: {@code creditsAvailable} is, summed over accepted and opened links, how
     * many more messages each link will hand the application before it stops reading (the
     * credits its sender would hold under the fabric transport); {@code creditStalls} counts
     * the times a link stopped reading for that reason, which stalls its sender through TCP's
     * window; {@code windowStalls} counts the sends that waited for a send window. Every message
     * goes in one send, so all are {@code eagerSent}.
     */
    @Override
    public TransportCounters counters() {
        long credits = 0;
        for (NettyLink link : attachedLinks) {
            credits += link.creditsAvailable();
        }
        long sent = messagesSent.sum();
        return new TransportCounters(linksOpen.get(), sent, messagesReceived.sum(), bytesSent.sum(),
                bytesReceived.sum(), sent, 0, credits, creditStalls.sum(), windowStalls.sum(), window.used(),
                window.peak(), reposts.sum(), receiveBuffersHeld.get(), linkFailures.sum(), 0, 0,
                authenticationFailures.sum(), 0);
    }

    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        serverChannel.close();
        TransportException cause = new TransportException(Reason.CLOSED, "transport " + localAddress + " closed");
        for (NettyPeer peer : new ArrayList<>(peers.values())) {
            peer.fail(cause, false);
        }
        for (Channel channel : channels) {
            channel.close();
        }
        boolean onOwnLoop = false;
        for (EventExecutor executor : group) {
            onOwnLoop |= executor.inEventLoop();
        }
        var shutdown = group.shutdownGracefully(0, 2, TimeUnit.SECONDS);
        if (!onOwnLoop) {
            shutdown.awaitUninterruptibly(10, TimeUnit.SECONDS);
        }
    }

    /** The event loops' threads, each at the nice value asked for ({@link ProgressNice}) once it starts. */
    private static DefaultThreadFactory eventLoopThreads(int nice) {
        return new DefaultThreadFactory("ferry-netty", true) {
            @Override
            protected Thread newThread(Runnable r, String name) {
                return super.newThread(() -> {
                    ProgressNice.applyToCurrentThread(nice);
                    r.run();
                }, name);
            }
        };
    }
}
