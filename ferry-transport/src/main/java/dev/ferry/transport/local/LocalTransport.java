package dev.ferry.transport.local;

import dev.ferry.memory.AllocatorConfig;
import dev.ferry.memory.MemoryRegistrar;
import dev.ferry.memory.PoolExhaustedException;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportCounters;
import dev.ferry.transport.TransportException.Reason;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.UnauthenticatedException;
import dev.ferry.transport.flow.ByteWindow;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;

/**
 * The in-JVM transport (see the package description): an address in this JVM's registry, the
 * peers, the send pool and process window, and the dispatch thread that is the only caller of
 * the handler.
 */
final class LocalTransport implements Transport {

    private static final System.Logger LOG = System.getLogger(LocalTransport.class.getName());
    private static final ConcurrentHashMap<String, LocalTransport> REGISTRY = new ConcurrentHashMap<>();
    private static final AtomicLong NEXT_ADDRESS = new AtomicLong();
    /** Connections open under one lock, so both ends are filed at once; connecting is rare. */
    private static final Object CONNECT_LOCK = new Object();
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final long ALLOCATE_SLICE_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    static final String PREFIX = "local:";
    /** The longest a dispatch thread polls after its last delivery before it parks. */
    private static final long SPIN_MICROS = 20;

    private final TransportConfig config;
    private final MessageHandler handler;
    private final String address;
    private final RegisteredAllocator allocator;
    private final ConcurrentHashMap<String, LocalPeer> peers = new ConcurrentHashMap<>();
    private final DeliveryQueue inbound = new DeliveryQueue();
    private final Thread dispatcher;
    private final long spinNanos;
    private volatile boolean sleeping;
    private volatile boolean closed;
    private final AtomicBoolean allocatorClosed = new AtomicBoolean();
    /** Buffers taken from the send pool and not yet back: the pool closes when this reaches 0 after close. */
    private final AtomicLong buffersOut = new AtomicLong();
    private final AtomicInteger links = new AtomicInteger();
    private final ConcurrentLinkedQueue<LocalLink> stalledLinks = new ConcurrentLinkedQueue<>();

    final ByteWindow window;
    final AtomicInteger linksOpen = new AtomicInteger();
    final LongAdder windowStalls = new LongAdder();
    final LongAdder creditStalls = new LongAdder();
    private final LongAdder messagesSent = new LongAdder();
    private final LongAdder bytesSent = new LongAdder();
    private final LongAdder largeSent = new LongAdder();
    private final LongAdder messagesReceived = new LongAdder();
    private final LongAdder bytesReceived = new LongAdder();
    private final LongAdder reposts = new LongAdder();
    private final AtomicLong receiveBuffersHeld = new AtomicLong();
    private final LongAdder linkFailures = new LongAdder();
    private final LongAdder authenticationFailures = new LongAdder();

    LocalTransport(TransportConfig config, MessageHandler handler) {
        this.config = config;
        this.handler = handler;
        this.window = new ByteWindow(config.sendWindowBytesPerProcess());
        // A short spin, then park: with one dispatch thread per transport and several transports in
        // a process, spinning for the whole idlePollMicros burns the cores the handlers need.
        this.spinNanos = Math.min(config.idlePollMicros(), SPIN_MICROS) * 1_000L;
        this.address = register();
        long slab = Math.max(1L << 20, Math.min(4L << 20, Long.highestOneBit(config.sendPoolBytes())));
        try {
            this.allocator = new RegisteredAllocator(MemoryRegistrar.NONE, AllocatorConfig.defaults()
                    .withSlabBytes(slab)
                    .withQuota(PoolKind.SEND, config.sendPoolBytes() + slab)
                    .withQuota(PoolKind.RECEIVE, 0)
                    .withQuota(PoolKind.RENDEZVOUS, 0));
        } catch (RuntimeException e) {
            REGISTRY.remove(address, this);
            throw new TransportException(Reason.UNAVAILABLE, "cannot open the local transport: " + e.getMessage(), e);
        }
        this.dispatcher = Thread.ofPlatform().daemon().name("ferry-local-" + address).unstarted(this::dispatchLoop);
        dispatcher.start();
    }

    private String register() {
        if (config.bindPort() != 0) {
            String wanted = PREFIX + config.bindPort();
            if (REGISTRY.putIfAbsent(wanted, this) != null) {
                throw new TransportException(Reason.UNAVAILABLE, "cannot open the local transport on " + wanted + ": the address is in use");
            }
            return wanted;
        }
        while (true) {
            String candidate = PREFIX + NEXT_ADDRESS.incrementAndGet();
            if (REGISTRY.putIfAbsent(candidate, this) == null) {
                return candidate;
            }
        }
    }

    TransportConfig config() {
        return config;
    }

    boolean isClosed() {
        return closed;
    }

    boolean inDispatchThread() {
        return Thread.currentThread() == dispatcher;
    }

    @Override
    public String localAddress() {
        return address;
    }

    @Override
    public Peer connect(String remote) {
        if (closed) {
            throw new TransportException(Reason.CLOSED, "transport " + address + " is closed");
        }
        LocalPeer known = peers.get(remote);
        if (known != null && known.isOpen()) {
            return known;
        }
        if (remote.equals(address)) {
            throw new TransportException(Reason.BAD_INPUT, "transport " + address + " cannot connect to itself");
        }
        synchronized (CONNECT_LOCK) {
            known = peers.get(remote);
            if (known != null && known.isOpen()) {
                return known;
            }
            LocalTransport target = REGISTRY.get(remote);
            if (target == null || target.closed) {
                throw new TransportException(Reason.UNREACHABLE, "cannot connect to " + remote + ": no local transport listens there"
                        + (remote.startsWith(PREFIX) ? "" : " (local addresses are " + PREFIX + "<n>)"));
            }
            authenticate(target);
            if (!reserveLink()) {
                throw new TransportException(Reason.LIMIT_REACHED, "cannot connect to " + remote + ": this process has " + config.maxLinks()
                        + " links (maxLinks)");
            }
            if (!target.reserveLink()) {
                releaseLink();
                throw new TransportException(Reason.LIMIT_REACHED, "cannot connect to " + remote + ": it has " + target.config.maxLinks()
                        + " links (maxLinks)");
            }
            LocalPeer mine = new LocalPeer(this, remote);
            LocalPeer theirs = new LocalPeer(target, address);
            LocalPeer.join(mine, theirs);
            peers.put(remote, mine);
            target.peers.put(address, theirs);
            return mine;
        }
    }

    /**
     * The HMAC challenge of {@link SharedSecret} both ways, as over a control channel: an
     * acceptor with a secret refuses a dialer that cannot prove it, a dialer with one refuses an
     * acceptor that cannot.
     */
    private void authenticate(LocalTransport target) {
        SharedSecret mine = config.secret();
        SharedSecret theirs = target.config.secret();
        if (mine == null && theirs == null) {
            return;
        }
        byte[] dialerNonce = new byte[SharedSecret.NONCE_BYTES];
        byte[] acceptorNonce = new byte[SharedSecret.NONCE_BYTES];
        RANDOM.nextBytes(dialerNonce);
        RANDOM.nextBytes(acceptorNonce);
        if (mine != null) {
            byte[] proof = theirs == null ? null : theirs.proof("ferry-server", dialerNonce, acceptorNonce, 0);
            if (!mine.verify(proof, "ferry-server", dialerNonce, acceptorNonce, 0)) {
                authenticationFailures.increment();
                throw new UnauthenticatedException("refused " + target.address
                        + ": it could not prove it holds the shared secret");
            }
        }
        if (theirs != null) {
            byte[] proof = mine == null ? null : mine.proof("ferry-client", acceptorNonce, dialerNonce, 0);
            if (!theirs.verify(proof, "ferry-client", acceptorNonce, dialerNonce, 0)) {
                target.authenticationFailures.increment();
                throw new UnauthenticatedException(target.address + " refused the connection: this side could not "
                        + "prove it holds the shared secret");
            }
        }
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

    void forget(LocalPeer peer) {
        peers.remove(peer.address(), peer);
    }

    // ------------------------------------------------------------------------------------------
    // Send pool

    LocalMessage tryAllocate(int length) {
        RegisteredBuffer buffer;
        try {
            buffer = allocator.tryAllocate(PoolKind.SEND, Math.max(1, length));
        } catch (IllegalStateException e) {
            throw new TransportException(Reason.CLOSED, "transport " + address + " is closed", e);
        }
        return buffer == null ? null : taken(buffer, length);
    }

    /** A buffer, waiting at most one slice (and never past {@code deadline}); null if none came free. */
    LocalMessage allocate(int length, long deadline) {
        long wait = Math.max(1, Math.min(ALLOCATE_SLICE_NANOS, deadline - System.nanoTime()));
        try {
            RegisteredBuffer buffer = allocator.tryAllocate(PoolKind.SEND, Math.max(1, length));
            if (buffer == null) { // the wait's Duration only when the pool is out of room
                buffer = allocator.allocate(PoolKind.SEND, Math.max(1, length), Duration.ofNanos(wait));
            }
            return taken(buffer, length);
        } catch (PoolExhaustedException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while waiting for a send buffer", e);
        } catch (IllegalStateException e) {
            throw new TransportException(Reason.CLOSED, "transport " + address + " is closed", e);
        }
    }

    private LocalMessage taken(RegisteredBuffer buffer, int length) {
        buffersOut.incrementAndGet();
        return new LocalMessage(this, buffer, length);
    }

    /** A buffer of this transport's pool came back; the last one after close closes the pool. */
    void bufferFreed() {
        if (buffersOut.decrementAndGet() == 0 && closed) {
            closeAllocator();
        }
    }

    private void closeAllocator() {
        if (allocatorClosed.compareAndSet(false, true)) {
            try {
                allocator.close();
            } catch (IllegalStateException e) {
                LOG.log(System.Logger.Level.WARNING, "local transport " + address + ": " + e.getMessage());
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Windows

    /** {@code link} stopped at a message the windows did not admit; it is drained when bytes free up. */
    void registerStalled(LocalLink link) {
        if (link.stalled.compareAndSet(false, true)) {
            stalledLinks.add(link);
        }
    }

    void wakeStalled() {
        if (stalledLinks.isEmpty()) {
            return;
        }
        // Only the links registered now: one that stalls again re-registers for the next wake-up.
        LocalLink link;
        for (int n = stalledLinks.size(); n > 0 && (link = stalledLinks.poll()) != null; n--) {
            link.stalled.set(false);
            link.drain();
        }
    }

    // ------------------------------------------------------------------------------------------
    // Dispatch

    /** Queues {@code delivery} for this transport's dispatch thread; any thread. */
    void enqueue(Delivery delivery) {
        inbound.offer(delivery);
        if (sleeping) {
            LockSupport.unpark(dispatcher);
        }
    }

    private void dispatchLoop() {
        long idleSince = 0;
        while (!closed) {
            Delivery next = inbound.poll();
            if (next != null) {
                try {
                    next.dispatch(this);
                } catch (RuntimeException | Error e) {
                    LOG.log(System.Logger.Level.WARNING, "local transport " + address + ": dispatch failed", e);
                }
                idleSince = 0;
                continue;
            }
            if (inbound.maybeNonEmpty()) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (idleSince == 0) {
                idleSince = now;
            }
            if (now - idleSince < spinNanos) {
                Thread.onSpinWait();
                continue;
            }
            sleeping = true;
            if (!inbound.maybeNonEmpty() && !closed) {
                LockSupport.park(this);
            }
            sleeping = false;
            idleSince = 0;
        }
        for (Delivery left; (left = pollEventually()) != null; ) {
            left.discard(this);
        }
    }

    private Delivery pollEventually() {
        while (true) {
            Delivery next = inbound.poll();
            if (next != null || !inbound.maybeNonEmpty()) {
                return next;
            }
            Thread.onSpinWait();
        }
    }

    /** On the dispatch thread: the handler gets {@code message} from {@code from}. */
    void deliver(LocalPeer from, InboundMessage message) {
        assert inDispatchThread();
        try {
            handler.onMessage(from, message);
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.WARNING, "message handler failed on a message from " + from.address(), e);
        }
    }

    /** Tells the handler, on the dispatch thread, that {@code peer} closed. */
    void notifyClosed(LocalPeer peer, Throwable cause) {
        if (closed) {
            return;
        }
        enqueue(new Delivery() {
            @Override
            void dispatch(LocalTransport transport) {
                assert inDispatchThread();
                try {
                    handler.onPeerClosed(peer, cause);
                } catch (RuntimeException | Error e) {
                    LOG.log(System.Logger.Level.WARNING, "message handler failed on the close of " + peer.address(), e);
                }
            }

            @Override
            void discard(LocalTransport transport) {
            }
        });
    }

    // ------------------------------------------------------------------------------------------
    // Counters

    void onSent(int length) {
        messagesSent.increment();
        bytesSent.add(length);
        if (length > config.eagerThreshold()) {
            largeSent.increment();
        }
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

    /**
     * {@inheritDoc}
     *
     * <p>Every message is handed over as it is; {@code rendezvousSent} counts those above the
     * eager threshold (which another transport would send by rendezvous), {@code eagerSent} the
     * others. {@code reposts} counts released messages (their credits returned).
     */
    @Override
    public TransportCounters counters() {
        long credits = 0;
        for (LocalPeer peer : peers.values()) {
            credits += peer.credits();
        }
        long sent = messagesSent.sum();
        long large = largeSent.sum();
        return new TransportCounters(linksOpen.get(), sent, messagesReceived.sum(), bytesSent.sum(),
                bytesReceived.sum(), sent - large, large, credits, creditStalls.sum(), windowStalls.sum(),
                window.used(), window.peak(), reposts.sum(), receiveBuffersHeld.get(), linkFailures.sum(), 0, 0,
                authenticationFailures.sum(), 0);
    }

    @Override
    public void close() {
        synchronized (CONNECT_LOCK) {
            if (closed) {
                return;
            }
            closed = true;
            REGISTRY.remove(address, this);
        }
        // Only the remote ends are told: to them this side is a peer that went away.
        TransportException cause = new TransportException(Reason.PEER_FAILED, "transport " + address + " closed");
        for (LocalPeer peer : new ArrayList<>(peers.values())) {
            LocalConnection connection = peer.connection();
            boolean dialer = connection.dialer == peer;
            connection.fail(cause, !dialer, dialer); // only the remote end is told
        }
        LockSupport.unpark(dispatcher);
        if (!inDispatchThread()) {
            try {
                dispatcher.join(TimeUnit.SECONDS.toMillis(10));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (buffersOut.get() == 0) {
            closeAllocator();
        }
    }

    @Override
    public String toString() {
        return "LocalTransport[" + address + (closed ? ", closed" : "") + "]";
    }
}
