package dev.ferry.bench.stream;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiConsumer;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.Transports;
import org.HdrHistogram.Histogram;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import dev.ferry.transport.TransportException.Reason;

/**
 * Both sides of a run through Ferry's transport API.
 *
 * <p>The stream's sender keeps {@code window} messages in flight in a ring of slots. Slot
 * {@code seq % window} carries message {@code seq}: the sender takes a buffer
 * ({@code Peer.allocate}), writes the sequence number into its first 8 bytes, stamps the slot
 * and sends. Each slot owns one completion callback, made once, that stamps the completion time
 * and bumps the slot's completion count; the sender reuses a slot once its previous message
 * completed, and records that message's latency then, on its own thread. So the data path
 * allocates only what the API does (the buffer's handle and the future with its completion node).
 *
 * <p>The ping-pong runs on the transport's delivery thread: each reply, as it arrives, is timed
 * and answered with the next message, as an RPC layer on this transport would do it.
 */
final class TransportStream {

    /** Spins before each yield while waiting: two cores serve three busy threads here. */
    private static final int SPINS = 64;

    private TransportStream() {
    }

    /**
     * The transport configuration both sides use: the defaults, as applications get them, but for
     * the bind host under shm. libfabric 1.17's shm names an endpoint after the node it is opened
     * with ({@code 127.0.0.1:0:0} for the first endpoint of a process), so two processes on
     * 127.0.0.1 collide and the second {@code fi_enable} fails with EBUSY. Each process therefore
     * binds its own loopback address, derived from its PID (Linux routes all of 127/8 to lo).
     */
    static TransportConfig config(StreamSpec spec) {
        TransportConfig c = TransportConfig.defaults(spec.provider());
        if (!spec.fabricProvider().equals("shm")) {
            return c;
        }
        long pid = ProcessHandle.current().pid();
        String host = "127." + (1 + (pid >>> 16) % 254) + "." + ((pid >>> 8) & 255) + "." + (pid & 255);
        return new TransportConfig(c.provider(), host, c.bindPort(), c.linksPerPeer(), c.maxLinks(),
                c.eagerThreshold(), c.receiveBuffersPerLink(), c.sendWindowBytesPerLink(), c.sendWindowBytesPerPeer(),
                c.sendWindowBytesPerProcess(), c.sendPoolBytes(), c.receivePoolBytes(), c.rendezvousPoolBytes(),
                c.rendezvousChunkBytes(), c.maxMessageSize(), c.connectTimeoutMillis());
    }

    // ------------------------------------------------------------------------------------------
    // Stream

    /** Streams at the server at {@code address} and measures. */
    static Measured stream(StreamSpec spec, String address, Runnable atTimedStart, Runnable atTimedEnd) {
        try (Transport transport = Transports.open(config(spec), Discard.INSTANCE)) {
            Peer peer = transport.connect(address);
            Measured measured = new Sender(spec, peer).run(transport, atTimedStart);
            atTimedEnd.run();
            return measured;
        }
    }

    /** Drops whatever arrives at the client (nothing should). */
    private enum Discard implements MessageHandler {
        INSTANCE;

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            message.release();
        }
    }

    /** The stream's sending thread and its ring of in-flight slots. */
    private static final class Sender {
        private final StreamSpec spec;
        private final Peer peer;
        private final int window;
        private final int size;
        private final int streams;
        private final long timeoutNanos;
        private final long[] sentAt;
        private final long[] doneAt;
        /** Completions per slot, written by the callbacks; read against {@link #uses}. */
        private final AtomicLongArray completions;
        private final long[] uses;
        private final boolean[] timed;
        private final Completion[] callbacks;
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private Histogram latency = Measured.histogram();
        private long lastDone;
        private Transport transport;

        Sender(StreamSpec spec, Peer peer) {
            this.spec = spec;
            this.peer = peer;
            this.window = spec.effectiveWindow();
            this.size = spec.size();
            this.streams = spec.streams();
            this.timeoutNanos = TimeUnit.MILLISECONDS.toNanos(spec.timeoutMillis());
            this.sentAt = new long[window];
            this.doneAt = new long[window];
            this.completions = new AtomicLongArray(window);
            this.uses = new long[window];
            this.timed = new boolean[window];
            this.callbacks = new Completion[window];
            for (int i = 0; i < window; i++) {
                callbacks[i] = new Completion(i);
            }
        }

        Measured run(Transport transport, Runnable atTimedStart) {
            this.transport = transport;
            long seq = 0;
            long warmupEnd = System.nanoTime() + (long) (spec.warmupSeconds() * 1e9);
            while (System.nanoTime() < warmupEnd) {
                send(seq++, false);
            }
            latency = Measured.histogram();
            atTimedStart.run();
            SideCounters before = SideCounters.of(transport.counters());
            long first = seq;
            long allocBefore = Measured.threadAllocatedBytes();
            long start = System.nanoTime();
            if (spec.messages() > 0) {
                long end = first + spec.messages();
                while (seq < end) {
                    send(seq++, true);
                }
            } else {
                long end = start + (long) (spec.seconds() * 1e9);
                // Look at the clock every 16 messages: nanoTime is a fair share of a small send.
                while ((seq & 15) != 0 || System.nanoTime() < end) {
                    send(seq++, true);
                }
            }
            for (int i = 0; i < window; i++) {
                awaitSlot(i);
            }
            long allocAfter = Measured.threadAllocatedBytes();
            long messages = seq - first;
            SideCounters counters = SideCounters.of(transport.counters()).minus(before);
            return new Measured(messages, lastDone - start, latency, counters,
                    Measured.perMessage(allocBefore, allocAfter, messages));
        }

        private void send(long seq, boolean record) {
            int slot = (int) (seq % window);
            awaitSlot(slot);
            OutboundMessage message = peer.allocate(size);
            if (size >= Long.BYTES) {
                message.segment().set(JAVA_LONG_UNALIGNED, 0, seq);
            }
            uses[slot]++;
            timed[slot] = record;
            sentAt[slot] = System.nanoTime();
            peer.send((int) (seq % streams), message).whenComplete(callbacks[slot]);
        }

        /** Waits until the slot's last message completed, and records its latency. */
        private void awaitSlot(int slot) {
            long want = uses[slot];
            if (completions.get(slot) != want) {
                long deadline = 0;
                for (int spins = 0; completions.get(slot) != want; spins++) {
                    if (spins < SPINS) {
                        Thread.onSpinWait();
                        continue;
                    }
                    Thread.yield();
                    long now = System.nanoTime();
                    if (deadline == 0) {
                        deadline = now + timeoutNanos;
                    } else if (now > deadline) {
                        throw new TransportException(Reason.TIMEOUT, "no completion within " + spec.timeoutMillis() + " ms; "
                                + transport.counters());
                    }
                    checkFailure();
                }
            }
            checkFailure();
            if (want > 0) {
                long done = doneAt[slot];
                lastDone = Math.max(lastDone, done);
                if (timed[slot]) {
                    Measured.record(latency, done - sentAt[slot]);
                    timed[slot] = false;
                }
            }
        }

        private void checkFailure() {
            Throwable t = failure.get();
            if (t != null) {
                throw new TransportException(TransportException.reasonOf(t, Reason.PEER_FAILED), "send failed: " + t.getMessage(), t);
            }
        }

        /** One per slot, made once: the future's completion stamps the slot. */
        private final class Completion implements BiConsumer<Object, Throwable> {
            private final int slot;

            Completion(int slot) {
                this.slot = slot;
            }

            @Override
            public void accept(Object ignored, Throwable error) {
                doneAt[slot] = System.nanoTime();
                if (error != null) {
                    failure.compareAndSet(null, error);
                }
                completions.incrementAndGet(slot); // publishes doneAt
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // Ping-pong

    /** Runs round trips with the echoing server at {@code address} and measures. */
    static Measured pingPong(StreamSpec spec, String address, Runnable atTimedStart, Runnable atTimedEnd) {
        Pinger pinger = new Pinger(spec, atTimedStart);
        try (Transport transport = Transports.open(config(spec), pinger)) {
            Peer peer = transport.connect(address);
            Measured measured = pinger.run(transport, peer);
            atTimedEnd.run();
            return measured;
        }
    }

    /** The client's handler: times each reply and sends the next ping at once. */
    private static final class Pinger implements MessageHandler {
        private final StreamSpec spec;
        private final CountDownLatch done = new CountDownLatch(1);
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private final Histogram latency = Measured.histogram();
        private final long warmupNanos;
        private Peer peer;
        private long sentAt;
        private long count;
        private long firstTimed = -1;
        private long start;
        private long end;
        private long allocBefore;
        private volatile long elapsed;
        private volatile long timedMessages;
        private volatile double alloc = -1;
        private volatile SideCounters before;
        private Transport transport;

        private final Runnable atTimedStart;

        Pinger(StreamSpec spec, Runnable atTimedStart) {
            this.spec = spec;
            this.atTimedStart = atTimedStart;
            this.warmupNanos = (long) (spec.warmupSeconds() * 1e9);
        }

        Measured run(Transport t, Peer to) {
            this.transport = t;
            this.peer = to;
            this.before = SideCounters.of(t.counters());
            start = System.nanoTime();
            ping();
            long limit = (long) ((spec.warmupSeconds() + (spec.messages() > 0 ? 0 : spec.seconds())) * 1000)
                    + (spec.messages() > 0 ? Math.max(60_000, spec.messages()) : 0) + spec.timeoutMillis();
            try {
                if (!done.await(limit, TimeUnit.MILLISECONDS)) {
                    throw new TransportException(Reason.TIMEOUT, "ping-pong did not finish within " + limit + " ms (" + count
                            + " round trips)");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new TransportException(Reason.INTERRUPTED, "interrupted", e);
            }
            Throwable t2 = failure.get();
            if (t2 != null) {
                throw new TransportException(TransportException.reasonOf(t2, Reason.PEER_FAILED), "ping-pong failed: " + t2.getMessage(), t2);
            }
            SideCounters counters = SideCounters.of(t.counters()).minus(before);
            return new Measured(timedMessages, elapsed, latency, counters, alloc);
        }

        private void ping() {
            OutboundMessage message = peer.allocate(spec.size());
            if (spec.size() >= Long.BYTES) {
                message.segment().set(JAVA_LONG_UNALIGNED, 0, count);
            }
            sentAt = System.nanoTime();
            peer.send(0, message);
        }

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            long now = System.nanoTime();
            message.release();
            try {
                count++;
                if (firstTimed >= 0) {
                    Measured.record(latency, now - sentAt);
                    long timed = count - firstTimed;
                    if (spec.messages() > 0 ? timed >= spec.messages() : now >= end) {
                        timedMessages = timed;
                        elapsed = now - start;
                        alloc = Measured.perMessage(allocBefore, Measured.threadAllocatedBytes(), timed);
                        done.countDown();
                        return;
                    }
                } else if (now - start >= warmupNanos) {
                    firstTimed = count;
                    atTimedStart.run();
                    before = SideCounters.of(transport.counters());
                    allocBefore = Measured.threadAllocatedBytes();
                    start = System.nanoTime();
                    end = start + (long) (spec.seconds() * 1e9);
                }
                ping();
            } catch (RuntimeException e) {
                failure.compareAndSet(null, e);
                done.countDown();
            }
        }

        @Override
        public void onPeerClosed(Peer p, Throwable cause) {
            failure.compareAndSet(null, cause);
            done.countDown();
        }
    }

    // ------------------------------------------------------------------------------------------
    // Server side

    /** Opens the server's transport: it releases what arrives, or echoes it in a ping-pong. */
    static Transport openServer(StreamSpec spec) {
        MessageHandler handler = spec.mode() == StreamSpec.Mode.PINGPONG ? Echo.INSTANCE : Discard.INSTANCE;
        return Transports.open(config(spec), handler);
    }

    /** Answers every message with a copy on the same stream. */
    private enum Echo implements MessageHandler {
        INSTANCE;

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            MemorySegment in = message.segment();
            OutboundMessage reply = from.allocate((int) in.byteSize());
            MemorySegment.copy(in, 0, reply.segment(), 0, in.byteSize());
            int stream = message.stream();
            message.release();
            from.send(stream, reply);
        }
    }
}
