package dev.ferry.bench.ps;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

import dev.ferry.rpc.TransportOpener;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transports;

/**
 * A server's receive-side queue: requests that have arrived (all their bytes received) and are
 * not yet answered, and their bytes, now and at peak. It is measured the same way on both sides:
 * on Ferry from arrival of a request's receive buffer to its release (the RPC server holds the
 * buffer until the handler returns), on gRPC from a message's inbound wire size to its stream's
 * close.
 */
final class QueueGauge {

    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong bytes = new AtomicLong();
    private final AtomicLong peakRequests = new AtomicLong();
    private final AtomicLong peakBytes = new AtomicLong();

    void arrive(long size) {
        max(peakRequests, requests.incrementAndGet());
        max(peakBytes, bytes.addAndGet(size));
    }

    void addBytes(long size) {
        max(peakBytes, bytes.addAndGet(size));
    }

    void leave(long size) {
        requests.decrementAndGet();
        bytes.addAndGet(-size);
    }

    void leaveBytes(long size) {
        bytes.addAndGet(-size);
    }

    void leaveRequest() {
        requests.decrementAndGet();
    }

    long peakRequests() {
        return peakRequests.get();
    }

    long peakBytes() {
        return peakBytes.get();
    }

    /** Starts a new peak from the present level. */
    void resetPeaks() {
        peakRequests.set(requests.get());
        peakBytes.set(bytes.get());
    }

    private static void max(AtomicLong peak, long value) {
        long seen = peak.get();
        while (value > seen && !peak.compareAndSet(seen, value)) {
            seen = peak.get();
        }
    }

    /**
     * Opens Ferry transports whose inbound messages this gauge counts from arrival to release: the
     * receiver's queue of requests and bytes.
     */
    TransportOpener ferryOpener() {
        QueueGauge gauge = this;
        return (config, handler) -> Transports.open(config, new MessageHandler() {
            @Override
            public void onMessage(Peer from, InboundMessage message) {
                long size = message.segment().byteSize();
                gauge.arrive(size);
                handler.onMessage(from, new CountedMessage(message, gauge, size));
            }

            @Override
            public void onPeerClosed(Peer peer, Throwable cause) {
                handler.onPeerClosed(peer, cause);
            }
        });
    }

    private record CountedMessage(InboundMessage message, QueueGauge gauge, long size) implements InboundMessage {
        @Override
        public int stream() {
            return message.stream();
        }

        @Override
        public MemorySegment segment() {
            return message.segment();
        }

        @Override
        public void release() {
            gauge.leave(size);
            message.release();
        }
    }
}
