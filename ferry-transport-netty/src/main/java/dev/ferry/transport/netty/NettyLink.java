package dev.ferry.transport.netty;

import dev.ferry.transport.TransportException;
import dev.ferry.transport.flow.ByteWindow;
import io.netty.channel.Channel;
import io.netty.channel.ChannelPromise;
import io.netty.channel.EventLoop;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import dev.ferry.transport.TransportException.Reason;

/**
 * One TCP connection of a peer, served by one event loop.
 *
 * <p><b>Send side.</b> Application threads put messages in the link's queue under its lock; a
 * message is <em>admitted</em> when the link, peer and process windows all hold its bytes. Only
 * a drain task on the event loop writes, in queue order, and flushes once per drain, so order
 * per link (hence per stream) is the order of the send calls and a burst costs one syscall. A
 * message that is not admitted waits, and so does everything queued behind it; the drain that
 * stops at it registers the link with the transport, and any write completion anywhere in the
 * process wakes registered links. Bytes leave the windows when the socket took the whole frame.
 * {@code trySend} refuses while anything waits on the link, a little stricter than "anything of
 * its stream": the link is the unit of order here.
 *
 * <p><b>Receive side.</b> Every DATA frame handed to the application counts against the link
 * until released. Past {@link NettyTuning#heldFramesPerLink} frames or {@link
 * NettyTuning#heldBytesPerLink} bytes the decoder is suspended (auto-read off); it resumes when
 * the application has released down to half of both.
 */
final class NettyLink {

    private static final System.Logger LOG = System.getLogger(NettyLink.class.getName());

    final NettyTransport transport;
    final NettyPeer peer;
    final int index;
    final EventLoop loop;
    final ByteWindow window;
    final CompletableFuture<Void> connected = new CompletableFuture<>();
    final AtomicBoolean stalled = new AtomicBoolean();

    // Send side, guarded by this.
    private final ArrayDeque<PendingSend> queue = new ArrayDeque<>();
    private int unadmitted;
    private boolean drainScheduled;
    private boolean failed;
    private volatile Channel channel;
    private final List<PendingSend> batch = new ArrayList<>();
    private final Runnable drainTask = this::drain;

    // Receive side.
    private FrameDecoder decoder;
    private final int maxHeldFrames;
    private final long maxHeldBytes;
    private final AtomicInteger heldFrames = new AtomicInteger();
    private final AtomicLong heldBytes = new AtomicLong();
    private volatile boolean suspended;
    private final AtomicBoolean resumeScheduled = new AtomicBoolean();
    private final Runnable resumeTask = this::resume;

    NettyLink(NettyTransport transport, NettyPeer peer, int index, EventLoop loop) {
        this.transport = transport;
        this.peer = peer;
        this.index = index;
        this.loop = loop;
        this.window = new ByteWindow(transport.config().sendWindowBytesPerLink());
        this.maxHeldFrames = NettyTuning.heldFramesPerLink(transport.config());
        this.maxHeldBytes = NettyTuning.heldBytesPerLink(transport.config());
    }

    /** The connection is up and authenticated: send what waited. */
    void attach(Channel ch, FrameDecoder frameDecoder) {
        this.decoder = frameDecoder;
        boolean schedule;
        synchronized (this) {
            if (failed) {
                ch.close();
                return;
            }
            channel = ch;
            transport.attachedLinks.add(this);
            peer.established();
            schedule = !drainScheduled;
            drainScheduled = true;
        }
        connected.complete(null);
        if (schedule) {
            execute(drainTask);
        }
    }

    Channel channel() {
        return channel;
    }

    /**
     * Queues {@code send}. With {@code tryOnly}, only if it is admitted at once and nothing waits
     * before it; returns whether it was queued.
     */
    boolean enqueue(PendingSend send, boolean tryOnly) {
        boolean schedule = false;
        synchronized (this) {
            if (failed) {
                throw new TransportException(TransportException.reasonOf(peer.failure(), Reason.PEER_FAILED), "link " + index + " to " + peer.address() + " is closed", peer.failure());
            }
            Channel ch = channel;
            boolean admitted = unadmitted == 0 && (!tryOnly || ch == null || ch.isWritable()) && acquire(send.bytes);
            if (!admitted) {
                if (tryOnly) {
                    return false;
                }
                unadmitted++;
                transport.windowStalls.increment();
            }
            send.admitted = admitted;
            queue.add(send);
            if (ch != null && !drainScheduled) {
                drainScheduled = true;
                schedule = true;
            }
        }
        if (schedule) {
            execute(drainTask);
        }
        return true;
    }

    private boolean acquire(int bytes) {
        if (!window.tryAcquire(bytes)) {
            return false;
        }
        if (!peer.window.tryAcquire(bytes)) {
            window.release(bytes);
            return false;
        }
        if (!transport.window.tryAcquire(bytes)) {
            peer.window.release(bytes);
            window.release(bytes);
            return false;
        }
        return true;
    }

    private boolean admits(int bytes) {
        return window.admits(bytes) && peer.window.admits(bytes) && transport.window.admits(bytes);
    }

    private void releaseWindows(int bytes) {
        window.release(bytes);
        peer.window.release(bytes);
        transport.window.release(bytes);
    }

    /** Asks for a drain on the event loop, unless one is pending. */
    void scheduleDrain() {
        synchronized (this) {
            if (drainScheduled || failed || channel == null) {
                return;
            }
            drainScheduled = true;
        }
        execute(drainTask);
    }

    private void drain() {
        int blockedBytes = -1;
        Channel ch;
        synchronized (this) {
            drainScheduled = false;
            ch = channel;
            if (failed || ch == null) {
                return;
            }
            PendingSend next;
            while ((next = queue.peek()) != null) {
                if (!next.admitted) {
                    if (!acquire(next.bytes)) {
                        blockedBytes = next.bytes;
                        break;
                    }
                    next.admitted = true;
                    unadmitted--;
                }
                batch.add(queue.poll());
            }
        }
        if (!batch.isEmpty()) {
            for (PendingSend send : batch) {
                ChannelPromise promise = ch.newPromise();
                promise.addListener(send);
                ch.write(send.message.frame(send.stream), promise);
            }
            batch.clear();
            ch.flush();
        }
        if (blockedBytes >= 0) {
            transport.registerStalled(this);
            // A window may have opened between the failed acquire and the registration.
            if (admits(blockedBytes)) {
                scheduleDrain();
            }
        }
    }

    /** The socket took the frame, or the link failed before it could. On the event loop. */
    void onWritten(PendingSend send, Throwable cause) {
        releaseWindows(send.bytes);
        send.message.written();
        if (cause == null) {
            transport.onSent(send.message.length());
            send.complete();
        } else {
            Throwable why = peer.failure() != null ? peer.failure() : cause;
            send.fail("send to " + peer.address() + " failed: " + why, why);
        }
        transport.wakeStalled();
    }

    /** Fails every queued message and closes the connection. */
    void fail(Throwable cause) {
        List<PendingSend> dropped;
        Channel ch;
        synchronized (this) {
            if (failed) {
                return;
            }
            failed = true;
            transport.releaseLink();
            transport.attachedLinks.remove(this);
            dropped = new ArrayList<>(queue);
            queue.clear();
            unadmitted = 0;
            ch = channel;
        }
        for (PendingSend send : dropped) {
            if (send.admitted) {
                releaseWindows(send.bytes);
            }
            send.message.discard();
            send.fail("send to " + peer.address() + " failed: " + cause, cause);
        }
        connected.completeExceptionally(cause);
        if (ch != null) {
            ch.close();
        }
        if (!dropped.isEmpty()) {
            transport.wakeStalled();
        }
    }

    // Receive side.

    /** Hands a DATA frame to the application; stops reading if it now holds too much. */
    void onData(Frame frame) {
        NettyInboundMessage message = new NettyInboundMessage(this, frame.stream(), frame.payload());
        heldFrames.incrementAndGet();
        heldBytes.addAndGet(message.length());
        transport.onReceived(message.length());
        try {
            transport.handler().onMessage(peer, message);
        } catch (RuntimeException | Error e) {
            LOG.log(System.Logger.Level.WARNING, "message handler failed on a message from " + peer.address(), e);
        }
        if (heldFrames.get() >= maxHeldFrames || heldBytes.get() >= maxHeldBytes) {
            suspended = true;
            decoder.suspend();
            transport.creditStalls.increment();
            // A release may have come between the check and the flag.
            if (belowResumeMark() && resumeScheduled.compareAndSet(false, true)) {
                execute(resumeTask);
            }
        }
    }

    /** The application released a message; any thread. */
    void onReleased(int length) {
        heldFrames.decrementAndGet();
        heldBytes.addAndGet(-length);
        transport.onReleased();
        if (suspended && belowResumeMark() && resumeScheduled.compareAndSet(false, true)) {
            execute(resumeTask);
        }
    }

    private boolean belowResumeMark() {
        return heldFrames.get() <= maxHeldFrames / 2 && heldBytes.get() <= maxHeldBytes / 2;
    }

    private void resume() {
        resumeScheduled.set(false);
        if (!suspended || !belowResumeMark()) {
            return;
        }
        suspended = false;
        decoder.resume();
    }

    /** Runs {@code task} on the link's event loop, unless the transport has shut it down. */
    private void execute(Runnable task) {
        if (loop.isShuttingDown()) {
            return;
        }
        try {
            loop.execute(task);
        } catch (RejectedExecutionException e) {
            // The transport closed meanwhile; there is nothing left to drain or resume.
        }
    }

    /** Receive credits the peer still has on this link, in the fabric transport's terms. */
    int creditsAvailable() {
        return Math.max(0, maxHeldFrames - heldFrames.get());
    }
}
