package dev.ferry.bench.pingpong;

import dev.ferry.ps.net.ChildJvm;
import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.Transports;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import dev.ferry.transport.TransportException.Reason;

/**
 * The kernel-TCP baseline: the same ping-pong through the transport API on the Netty transport.
 * The server echoes each message. The client sends the next message from its handler, on the
 * transport's progress thread, so no thread hand-off sits inside the timed round trip; the
 * benchmark's own code allocates nothing per message (whatever the transport allocates is
 * counted in the allocation figures).
 */
final class NettyPingPong {

    /** The stream every message goes on. */
    private static final int STREAM = 0;

    private NettyPingPong() {
    }

    /** Runs the client against a server child that has printed its ADDRESS. */
    static PingPongResult runClient(PingPongSpec spec, ChildJvm server) {
        String address = new String(ControlLine.bytes(server.expect(ControlLine.ADDRESS, ChildJvm.startMillis(spec.timeoutMillis()))),
                StandardCharsets.UTF_8);
        server.expect(ControlLine.READY, spec.timeoutMillis());
        Histogram histogram = new Histogram(FabricPingPong.HIGHEST_NANOS, 3);
        Allocation.currentThread(); // loads the JVM's counter before anything is timed
        Client client = new Client(spec, histogram, server);
        try (Transport transport = Transports.open(config(spec), client)) {
            client.start(transport.connect(address));
            client.await(spec.timeoutMillis(), server);
            double serverAlloc = PingPong.finish(server, spec.timeoutMillis());
            return PingPongResult.of(spec, client.warmupRoundTrips(), histogram, client.allocatedPerRoundTrip(),
                    serverAlloc).withServerPid(server.pid());
        }
    }

    private static TransportConfig config(PingPongSpec spec) {
        TransportConfig config = TransportConfig.defaults(PingPongSpec.NETTY);
        return config.withConnectTimeoutMillis(spec.timeoutMillis());
    }

    /** Serves until the client is done; prints the control lines through {@code control}. */
    static void serve(PingPongSpec spec, ControlChannel control) throws InterruptedException {
        Allocation.currentThread(); // loads the JVM's counter before anything is timed
        Echo echo = new Echo(control);
        try (Transport transport = Transports.open(config(spec), echo)) {
            control.send(ControlLine.of(ControlLine.ADDRESS, transport.localAddress().getBytes(StandardCharsets.UTF_8)));
            control.send(ControlLine.READY);
            control.awaitStop();
            control.send(ControlLine.STATS + " " + echo.allocatedPerRoundTrip());
        }
    }

    /** The server's handler: answers each message with a copy of it. */
    private static final class Echo implements MessageHandler {
        private final ControlChannel control;
        private long messages;
        private long mark = -1;
        /** The progress thread, whose allocation counter the caller reads at the end. */
        private volatile long threadId = -1;
        private volatile long allocatedBefore = -1;
        private volatile long messagesAtMark;
        private volatile long messagesSeen;

        Echo(ControlChannel control) {
            this.control = control;
        }

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            if (mark < 0 && control.timed()) {
                mark = messages;
                messagesAtMark = messages;
                threadId = Thread.currentThread().threadId();
                allocatedBefore = Allocation.currentThread();
            }
            MemorySegment in = message.segment();
            int length = (int) in.byteSize();
            OutboundMessage out = from.tryAllocate(length);
            if (out == null) {
                out = from.allocate(length);
            }
            MemorySegment.copy(in, 0, out.segment(), 0, length);
            message.release();
            if (!from.trySend(STREAM, out)) {
                from.send(STREAM, out);
            }
            messagesSeen = ++messages;
        }

        /** Bytes per message since the timed phase began; call once the client is done. */
        double allocatedPerRoundTrip() {
            long before = allocatedBefore;
            long after = threadId < 0 ? -1 : Allocation.ofThread(threadId);
            return before < 0 || after < 0 ? -1 : Allocation.perOperation(after - before, messagesSeen - messagesAtMark);
        }
    }

    /** The client's handler: times the reply and sends the next message. */
    private static final class Client implements MessageHandler {
        private final int size;
        private final long minWarmup;
        private final long warmupNanos;
        private final long iterations;
        private final Histogram histogram;
        private final ChildJvm server;
        private long warmupStart;
        /** Round trips that end the run: unknown until the warm-up is over. */
        private long total = Long.MAX_VALUE;
        private long warmup = -1;
        private final CountDownLatch done = new CountDownLatch(1);
        private Peer peer;
        /** Round trips completed; written by the progress thread, watched by the caller. */
        private volatile long completed;
        private volatile Throwable failure;
        private long start;
        private long allocatedBefore = -1;
        private long allocatedAfter = -1;

        Client(PingPongSpec spec, Histogram histogram, ChildJvm server) {
            this.size = spec.size();
            this.minWarmup = Math.max(1, spec.warmup());
            this.warmupNanos = spec.warmupMillis() * 1_000_000L;
            this.iterations = spec.iterations();
            this.histogram = histogram;
            this.server = server;
        }

        void start(Peer to) {
            this.peer = to;
            warmupStart = System.nanoTime();
            sendNext(0);
        }

        private void sendNext(long i) {
            start = System.nanoTime();
            OutboundMessage out = peer.tryAllocate(size);
            if (out == null) {
                out = peer.allocate(size);
            }
            if (size >= Long.BYTES) {
                out.segment().set(JAVA_LONG_UNALIGNED, 0, i);
            }
            if (!peer.trySend(STREAM, out)) {
                peer.send(STREAM, out);
            }
        }

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            long now = System.nanoTime();
            long i = completed;
            try {
                MemorySegment in = message.segment();
                if (in.byteSize() != size) {
                    throw new TransportException(Reason.PEER_FAILED, "reply " + i + " has " + in.byteSize() + " bytes, expected " + size);
                }
                if (size >= Long.BYTES && in.get(JAVA_LONG_UNALIGNED, 0) != i) {
                    throw new TransportException(Reason.PEER_FAILED, "reply " + i + " echoes round trip " + in.get(JAVA_LONG_UNALIGNED, 0));
                }
            } catch (RuntimeException e) {
                failure = e;
                done.countDown();
                return;
            } finally {
                message.release();
            }
            histogram.recordValue(Math.min(now - start, FabricPingPong.HIGHEST_NANOS));
            completed = ++i;
            if (warmup < 0 && i >= minWarmup && now - warmupStart >= warmupNanos) {
                // The warm-up is over (at least one round trip, so that this thread is the one counted).
                warmup = i;
                total = i + iterations;
                server.send(ControlLine.TIMED);
                // The warm-up recorded too, so that recording is compiled before it counts.
                histogram.reset();
                allocatedBefore = Allocation.currentThread();
            }
            if (i == total) {
                allocatedAfter = Allocation.currentThread();
                done.countDown();
                return;
            }
            try {
                sendNext(i);
            } catch (RuntimeException e) {
                failure = e;
                done.countDown();
            }
        }

        @Override
        public void onPeerClosed(Peer closed, Throwable cause) {
            if (done.getCount() > 0) {
                failure = cause != null ? cause : new TransportException(Reason.PEER_FAILED, "the server closed the connection");
                done.countDown();
            }
        }

        /** Waits for the last reply, failing when no round trip completes within {@code timeoutMillis}. */
        void await(long timeoutMillis, ChildJvm server) {
            long seen = -1;
            long lastProgress = System.nanoTime();
            try {
                while (!done.await(100, TimeUnit.MILLISECONDS)) {
                    long now = System.nanoTime();
                    long c = completed;
                    if (c != seen) {
                        seen = c;
                        lastProgress = now;
                    } else if (now - lastProgress > TimeUnit.MILLISECONDS.toNanos(timeoutMillis)) {
                        throw new TransportException(Reason.TIMEOUT, "no reply to round trip " + c + " within " + timeoutMillis + " ms");
                    }
                    if (!server.isAlive()) {
                        throw new TransportException(Reason.PEER_FAILED, "the server went away during round trip " + c);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new TransportException(Reason.INTERRUPTED, "interrupted");
            }
            Throwable f = failure;
            if (f != null) {
                throw f instanceof RuntimeException r ? r : new TransportException(TransportException.reasonOf(f, Reason.PEER_FAILED), f.toString());
            }
        }

        /** Bytes the progress thread allocated per timed round trip; valid after {@link #await}. */
        double allocatedPerRoundTrip() {
            return allocatedBefore < 0 || allocatedAfter < 0 ? -1
                    : Allocation.perOperation(allocatedAfter - allocatedBefore, iterations);
        }

        /** Warm-up round trips run; valid after {@link #await}. */
        long warmupRoundTrips() {
            return warmup;
        }
    }
}
