package dev.ferry.transport.local;

import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One message, from allocation to release: the sender encodes into a buffer of its send pool,
 * and the same buffer is the receiver's read-only view (zero-copy). The buffer goes back to the
 * sender's pool when the sender releases it unsent, when the send fails, or when the receiver
 * releases it; the last also returns the link's receive credit.
 *
 * <pre>
 *   OPEN --send--&gt; SENT --dispatch--&gt; DELIVERED --release--&gt; RELEASED
 *     |               |  (trySend refused: back to OPEN)
 *     +--release--&gt; RELEASED &lt;--peer failed, transport closed--+
 * </pre>
 */
final class LocalMessage extends Delivery implements OutboundMessage, InboundMessage {

    private static final int OPEN = 0;
    private static final int SENT = 1;
    private static final int DELIVERED = 2;
    private static final int RELEASED = 3;

    private final LocalTransport owner;
    private final RegisteredBuffer buffer;
    private final AtomicInteger state = new AtomicInteger(OPEN);
    private MemorySegment segment;
    private int length;

    // Set at send, read by the link and the receiver's dispatch thread.
    LocalLink link;
    int stream;
    CompletableFuture<Void> future;
    /** What hears of a watched send's outcome ({@link LocalPeer#sendWatched}), else null. */
    BiConsumer<? super Void, ? super Throwable> watcher;
    /** Whether the send windows hold this message's bytes; guarded by the link. */
    boolean admitted;

    LocalMessage(LocalTransport owner, RegisteredBuffer buffer, int length) {
        this.owner = owner;
        this.buffer = buffer;
        this.length = length;
        this.segment = buffer.segment().asSlice(0, length);
    }

    LocalTransport owner() {
        return owner;
    }

    int length() {
        return length;
    }

    @Override
    public int stream() {
        return stream;
    }

    @Override
    public MemorySegment segment() {
        int s = state.get();
        if (s != OPEN && s != DELIVERED) {
            throw new IllegalStateException("message already " + name(s));
        }
        return segment;
    }

    @Override
    public void truncate(int newLength) {
        if (state.get() != OPEN) {
            throw new IllegalStateException("message already " + name(state.get()));
        }
        if (newLength < 0 || newLength > length) {
            throw new IllegalArgumentException("cannot truncate a message of " + length + " bytes to " + newLength);
        }
        length = newLength;
        segment = segment.asSlice(0, newLength);
    }

    /**
     * Unsent, gives the buffer back to the sender's pool; received, also returns the credit of
     * its link. Twice, or after a send, is an error.
     */
    @Override
    public void release() {
        if (state.compareAndSet(OPEN, RELEASED)) {
            free();
            return;
        }
        if (state.compareAndSet(DELIVERED, RELEASED)) {
            LocalLink l = link;
            free();
            l.released();
            return;
        }
        throw new IllegalStateException("message already " + name(state.get()));
    }

    /** Hands the message to the transport for a send; a second send or a send after release fails. */
    void claim(LocalPeer peer) {
        if (owner != peer.transport) {
            throw new IllegalArgumentException("message was not allocated by this transport");
        }
        if (!state.compareAndSet(OPEN, SENT)) {
            throw new IllegalStateException("message already " + name(state.get()));
        }
    }

    /** Undoes {@link #claim} when {@code trySend} did not take the message. */
    void unclaim() {
        state.set(OPEN);
    }

    /** The receiver takes it: from now on its segment is the receiver's read-only view. */
    void delivered() {
        segment = segment.asReadOnly();
        state.set(DELIVERED);
    }

    /** A sent message that will not be delivered: buffer back, future failed. */
    void failSend(TransportException cause) {
        state.set(RELEASED);
        free();
        CompletableFuture<Void> f = future;
        if (f != null) {
            f.completeExceptionally(cause);
        }
        report(cause);
    }

    /** The send's outcome is known: success, to whoever waits or watches. */
    void sendDone() {
        if (future != null) {
            future.complete(null);
        }
        report(null);
    }

    /** Tells the watcher, once; its own failure stays its own, as a future's stage's would. */
    private void report(TransportException failure) {
        BiConsumer<? super Void, ? super Throwable> w = watcher;
        watcher = null;
        if (w == null) {
            return;
        }
        try {
            w.accept(null, failure);
        } catch (Throwable e) {
            if (e instanceof VirtualMachineError vmError) {
                throw vmError;
            }
            System.getLogger(LocalMessage.class.getName()).log(System.Logger.Level.WARNING,
                    "a send's outcome handler failed", e);
        }
    }

    private void free() {
        buffer.release();
        owner.bufferFreed();
    }

    @Override
    void dispatch(LocalTransport transport) {
        link.dispatch(this);
    }

    @Override
    void discard(LocalTransport transport) {
        link.failInFlight(this, new TransportException(Reason.CLOSED, "transport " + transport.localAddress()
                + " closed before the message was delivered"));
    }

    private static String name(int s) {
        return switch (s) {
            case OPEN -> "open";
            case SENT -> "sent";
            case DELIVERED -> "delivered";
            default -> "released";
        };
    }
}
