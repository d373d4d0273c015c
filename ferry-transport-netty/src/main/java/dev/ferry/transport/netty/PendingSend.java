package dev.ferry.transport.netty;

import dev.ferry.transport.TransportException;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelFutureListener;
import java.util.concurrent.CompletableFuture;
import dev.ferry.transport.TransportException.Reason;

/**
 * One message on its way through a link: queued (waiting for the send window, or for the link
 * to connect), then written, then complete when the socket took its last byte.
 */
final class PendingSend implements ChannelFutureListener {

    final NettyLink link;
    final NettyOutboundMessage message;
    final int stream;
    /** What the message holds of the send windows. */
    final int bytes;
    /** Null for {@code trySend}, whose caller has no future to watch. */
    final CompletableFuture<Void> future;
    /** Whether the send windows hold {@link #bytes} for it; guarded by the link. */
    boolean admitted;

    PendingSend(NettyLink link, NettyOutboundMessage message, int stream, CompletableFuture<Void> future) {
        this.link = link;
        this.message = message;
        this.stream = stream;
        // Windows count message bytes, as the counters do, not our header: the figures then mean
        // the same on every transport.
        this.bytes = message.length();
        this.future = future;
    }

    @Override
    public void operationComplete(ChannelFuture write) {
        link.onWritten(this, write.isSuccess() ? null : write.cause());
    }

    void complete() {
        if (future != null) {
            future.complete(null);
        }
    }

    void fail(String why, Throwable cause) {
        if (future != null) {
            future.completeExceptionally(cause instanceof TransportException t && t.getMessage().equals(why)
                    ? t : new TransportException(TransportException.reasonOf(cause, Reason.PEER_FAILED), why, cause));
        }
    }
}
