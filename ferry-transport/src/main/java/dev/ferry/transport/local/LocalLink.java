package dev.ferry.transport.local;

import dev.ferry.transport.TransportException.Reason;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.flow.ByteWindow;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One direction of one link: the messages a sending peer sends on the streams of this link, in
 * order, to the receiving transport's dispatch thread.
 *
 * <p>A message moves on when the link, peer and process windows all hold its bytes
 * (<em>admitted</em>) and the link has a receive credit; then it is queued for the receiver's
 * dispatch thread, still in flight. It leaves the windows when that thread hands it to the
 * handler (the send's future completes), and its credit comes back when the receiver releases
 * it. A message that cannot move waits in this link's queue with everything behind it; whoever
 * frees a credit or window bytes drains the queue. Every move to the receiver happens under this
 * link's lock, so the receiver sees the link's messages in the order of the send calls.
 */
final class LocalLink {

    final LocalPeer sender;
    final LocalPeer receiver;
    final int index;
    private final ByteWindow window;
    final AtomicBoolean stalled = new AtomicBoolean();

    // Guarded by this.
    private final ArrayDeque<LocalMessage> queue = new ArrayDeque<>();
    private int credits;
    /** Written under the lock; read without it on the dispatch path. */
    private volatile TransportException failure;

    LocalLink(LocalPeer sender, LocalPeer receiver, int index) {
        this.sender = sender;
        this.receiver = receiver;
        this.index = index;
        this.window = new ByteWindow(sender.transport.config().sendWindowBytesPerLink());
        this.credits = sender.transport.config().receiveBuffersPerLink();
    }

    /**
     * Sends {@code message}, or queues it behind the windows or the credits. With
     * {@code tryOnly}, only if the windows admit it now and nothing waits on the link; returns
     * whether the link took it.
     *
     * @throws TransportException if the link has failed (the caller still owns the message)
     */
    boolean submit(LocalMessage message, boolean tryOnly) {
        synchronized (this) {
            if (failure != null) {
                throw new TransportException(TransportException.reasonOf(failure, Reason.PEER_FAILED), "link " + index + " to " + sender.address() + " is closed: "
                        + failure.getMessage(), failure);
            }
            boolean admitted = queue.isEmpty() && acquire(message.length());
            if (!admitted && tryOnly) {
                return false;
            }
            message.admitted = admitted;
            if (admitted && credits > 0) {
                credits--;
                receiver.transport.enqueue(message);
                return true;
            }
            boolean first = queue.isEmpty();
            queue.add(message);
            if (admitted) {
                sender.transport.creditStalls.increment();
            } else {
                sender.transport.windowStalls.increment();
                if (first) {
                    drainLocked();
                }
            }
            return true;
        }
    }

    /** Moves what the windows and credits now allow; any thread. */
    synchronized void drain() {
        drainLocked();
    }

    private void drainLocked() {
        assert Thread.holdsLock(this);
        LocalMessage next;
        while (failure == null && (next = queue.peek()) != null) {
            if (!next.admitted) {
                if (!acquire(next.length())) {
                    // Registered first, then tried again: bytes freed in between are not missed.
                    sender.transport.registerStalled(this);
                    if (!acquire(next.length())) {
                        return;
                    }
                }
                next.admitted = true;
            }
            if (credits == 0) {
                return;
            }
            credits--;
            queue.poll();
            receiver.transport.enqueue(next);
        }
    }

    /** On the receiving transport's dispatch thread: hands {@code message} to the handler. */
    void dispatch(LocalMessage message) {
        LocalTransport to = receiver.transport;
        assert to.inDispatchThread();
        TransportException failed = failure();
        if (failed != null) {
            failInFlight(message, failed);
            return;
        }
        message.delivered();
        to.onReceived(message.length());
        sender.transport.onSent(message.length());
        releaseWindows(message.length());
        message.sendDone();
        sender.transport.wakeStalled();
        to.deliver(receiver, message);
    }

    /** The receiver released a message of this link: its credit comes back. Any thread. */
    void released() {
        receiver.transport.onReleased();
        boolean waiting;
        synchronized (this) {
            if (failure != null) {
                return;
            }
            credits++;
            waiting = !queue.isEmpty();
        }
        if (waiting) {
            drain();
        }
    }

    /** A message queued for the receiver that will not be delivered. */
    void failInFlight(LocalMessage message, TransportException cause) {
        releaseWindows(message.length());
        message.failSend(cause);
        sender.transport.wakeStalled();
    }

    /** Fails every message waiting on the link; later sends throw. */
    void fail(TransportException cause) {
        List<LocalMessage> dropped;
        synchronized (this) {
            if (failure != null) {
                return;
            }
            failure = cause;
            dropped = new ArrayList<>(queue);
            queue.clear();
        }
        for (LocalMessage message : dropped) {
            if (message.admitted) {
                releaseWindows(message.length());
            }
            message.failSend(cause);
        }
        if (!dropped.isEmpty()) {
            sender.transport.wakeStalled();
        }
    }

    TransportException failure() {
        return failure;
    }

    synchronized int credits() {
        return failure == null ? credits : 0;
    }

    private boolean acquire(int bytes) {
        if (!window.tryAcquire(bytes)) {
            return false;
        }
        if (!sender.window.tryAcquire(bytes)) {
            window.release(bytes);
            return false;
        }
        if (!sender.transport.window.tryAcquire(bytes)) {
            sender.window.release(bytes);
            window.release(bytes);
            return false;
        }
        return true;
    }

    private void releaseWindows(int bytes) {
        window.release(bytes);
        sender.window.release(bytes);
        sender.transport.window.release(bytes);
    }
}
