package dev.ferry.bench.stream;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.HexFormat;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.TimeUnit;

import dev.ferry.ps.net.ChildJvm;
import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.CompletionError;
import dev.ferry.fabric.CompletionQueue;
import dev.ferry.fabric.Endpoint;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.FabricException;
import dev.ferry.fabric.FabricSession;
import dev.ferry.fabric.Fi;
import dev.ferry.fabric.MemoryRegion;
import dev.ferry.fabric.OperationContexts;
import org.HdrHistogram.Histogram;

/**
 * Both sides of a stream on the raw libfabric binding: the ceiling that Ferry's transport is
 * measured against. One thread per side owns everything and busy-polls one completion queue.
 *
 * <p>The server posts {@code window} receives of {@code size} bytes ahead, reposts each buffer
 * as soon as its message arrives, and returns credits in 8-byte {@code fi_inject} messages, one
 * per quarter of the window. The client starts with {@code window} credits, spends one per
 * {@code fi_send} and waits (polling) for a credit or for a free send slot; latency is from the
 * post to the send's completion, as for the transport's future. Every size goes by plain sends,
 * as the provider implements them (shm: inline, then cross-memory attach for large ones; tcp:
 * the socket). Nothing is allocated per message on either side.
 */
final class RawStream {

    /** Receives the client posts for credit messages. */
    private static final int CREDIT_RECEIVES = 16;
    /** Bytes per credit receive buffer; a credit message carries one long. */
    private static final int CREDIT_BYTES = 64;
    private static final int BATCH = 32;
    /** Empty polls between looks at the clock. */
    private static final int CLOCK_MASK = (1 << 12) - 1;
    /**
     * Empty polls before each yield. Both sides busy-poll; on a small machine shared with other
     * work a spinning thread that never yields can keep its peer off the CPU for a whole
     * scheduler quantum (milliseconds). The transport's progress thread yields too.
     */
    private static final int SPIN_MASK = 63;

    private RawStream() {
    }

    /** The endpoint type: forced by a {@code /msg} or {@code /rdm} suffix, else MSG where it exists, else RDM. */
    static FabricSession openSession(StreamSpec spec, boolean listen, EndpointType forced, int cqSize) {
        String provider = spec.fabricProvider();
        int slash = spec.provider().indexOf('/');
        EndpointType want = forced;
        if (want == null && slash > 0) {
            want = EndpointType.valueOf(spec.provider().substring(slash + 1).toUpperCase(Locale.ROOT));
        }
        FabricException first = null;
        for (EndpointType type : new EndpointType[] {EndpointType.MSG, EndpointType.RDM}) {
            if (want != null && want != type) {
                continue;
            }
            try {
                return FabricSession.open(provider, type, host(provider), listen && type == EndpointType.MSG, cqSize);
            } catch (FabricException e) {
                first = first == null ? e : first;
            }
        }
        throw first != null ? first : new FabricException("no endpoint type for " + spec.provider());
    }

    /**
     * The node to open {@code provider} on: 127.0.0.1 for network providers; for shm, which names
     * its endpoint after the node, one name per process (see {@link TransportStream#config}).
     */
    private static String host(String provider) {
        return provider.equals("shm") ? "ferry-stream-" + ProcessHandle.current().pid() : "127.0.0.1";
    }

    private static long stride(int size) {
        return Math.max(64, (size + 63L) & ~63L);
    }

    // ------------------------------------------------------------------------------------------
    // Client

    /** Streams at the server that announced {@code ready} ({@code <type> <hex address>}). */
    static Measured client(StreamSpec spec, ChildJvm child, String ready, Runnable atTimedStart,
            Runnable atTimedEnd) {
        String[] parts = ready.split(" ");
        EndpointType type = EndpointType.valueOf(parts[0]);
        byte[] serverAddress = HexFormat.of().parseHex(parts[1]);
        int window = spec.effectiveWindow();
        try (Arena arena = Arena.ofShared();
             OperationContexts sendContexts = new OperationContexts(window);
             OperationContexts creditContexts = new OperationContexts(CREDIT_RECEIVES);
             CompletionBatch batch = new CompletionBatch(BATCH);
             FabricSession session = openSession(spec, false, type, 2 * window + 2 * CREDIT_RECEIVES + 64)) {
            FabricSession.Connection connection = session.connect(serverAddress, (int) spec.timeoutMillis());
            Endpoint ep = type == EndpointType.RDM ? session.sharedEndpoint() : connection.endpoint();
            MemorySegment sendMemory = arena.allocate(window * stride(spec.size()), 4096);
            MemorySegment creditMemory = arena.allocate((long) CREDIT_RECEIVES * CREDIT_BYTES, 4096);
            MemoryRegion sendRegion = session.domain().register(sendMemory);
            MemoryRegion creditRegion = session.domain().register(creditMemory);
            sendRegion.bind(ep);
            creditRegion.bind(ep);
            Client client = new Client(spec, session.completionQueue(), ep, connection.peer(), batch, sendContexts,
                    creditContexts, sendMemory, sendRegion.descriptor(), creditMemory, creditRegion.descriptor());
            for (int i = 0; i < CREDIT_RECEIVES; i++) {
                client.postCredit(i);
            }
            if (type == EndpointType.RDM) {
                child.send(StreamServer.PEER + " " + HexFormat.of().formatHex(session.address()));
            }
            child.expect(StreamServer.CONNECTED, spec.timeoutMillis());
            Measured measured = client.run(atTimedStart);
            atTimedEnd.run();
            return measured;
        }
    }

    /** The client's data path: primitive state, one thread. */
    private static final class Client {
        private final StreamSpec spec;
        private final CompletionQueue cq;
        private final Endpoint ep;
        private final long peer;
        private final CompletionBatch batch;
        private final OperationContexts sendContexts;
        private final OperationContexts creditContexts;
        private final long sendBase;
        private final long sendDescriptor;
        private final MemorySegment sendMemory;
        private final long stride;
        private final MemorySegment creditMemory;
        private final long creditDescriptor;
        private final int window;
        private final int size;
        private final long timeoutNanos;
        private final long[] sentAt;
        private final boolean[] busy;
        private final boolean[] timed;
        private Histogram latency = Measured.histogram();
        private long credits;
        private long creditStalls;
        private long windowStalls;
        private long lastDone;

        Client(StreamSpec spec, CompletionQueue cq, Endpoint ep, long peer, CompletionBatch batch,
                OperationContexts sendContexts, OperationContexts creditContexts, MemorySegment sendMemory,
                long sendDescriptor, MemorySegment creditMemory, long creditDescriptor) {
            this.spec = spec;
            this.cq = cq;
            this.ep = ep;
            this.peer = peer;
            this.batch = batch;
            this.sendContexts = sendContexts;
            this.creditContexts = creditContexts;
            this.sendMemory = sendMemory;
            this.sendBase = sendMemory.address();
            this.sendDescriptor = sendDescriptor;
            this.stride = stride(spec.size());
            this.creditMemory = creditMemory;
            this.creditDescriptor = creditDescriptor;
            this.window = spec.effectiveWindow();
            this.size = spec.size();
            this.timeoutNanos = TimeUnit.MILLISECONDS.toNanos(spec.timeoutMillis());
            this.sentAt = new long[window];
            this.busy = new boolean[window];
            this.timed = new boolean[window];
            this.credits = window;
        }

        void postCredit(int i) {
            long deadline = System.nanoTime() + timeoutNanos;
            while (!ep.recv(creditMemory.address() + (long) i * CREDIT_BYTES, CREDIT_BYTES, creditDescriptor,
                    Fi.ADDR_UNSPEC, creditContexts.context(i))) {
                poll();
                if (System.nanoTime() > deadline) {
                    throw new FabricException("could not post a credit receive within " + spec.timeoutMillis() + " ms");
                }
            }
        }

        Measured run(Runnable atTimedStart) {
            long seq = 0;
            long warmupEnd = System.nanoTime() + (long) (spec.warmupSeconds() * 1e9);
            while (System.nanoTime() < warmupEnd) {
                send(seq++, false);
            }
            latency = Measured.histogram();
            atTimedStart.run();
            long stallsBefore = creditStalls;
            long windowBefore = windowStalls;
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
                while ((seq & 15) != 0 || System.nanoTime() < end) {
                    send(seq++, true);
                }
            }
            for (int slot = 0; slot < window; slot++) {
                awaitSlot(slot);
            }
            long allocAfter = Measured.threadAllocatedBytes();
            long messages = seq - first;
            SideCounters counters = new SideCounters(creditStalls - stallsBefore, windowStalls - windowBefore,
                    messages, 0, messages, 0);
            return new Measured(messages, lastDone - start, latency, counters,
                    Measured.perMessage(allocBefore, allocAfter, messages));
        }

        private void send(long seq, boolean record) {
            int slot = (int) (seq % window);
            if (busy[slot]) {
                windowStalls++;
                awaitSlot(slot);
            }
            if (credits == 0) {
                creditStalls++;
                long deadline = 0;
                for (int polls = 1; credits == 0; polls++) {
                    if (poll() == 0) {
                        deadline = idle(polls, deadline, "a credit");
                    }
                }
            }
            long address = sendBase + slot * stride;
            if (size >= Long.BYTES) {
                sendMemory.set(JAVA_LONG_UNALIGNED, slot * stride, seq);
            }
            timed[slot] = record;
            sentAt[slot] = System.nanoTime();
            long deadline = 0;
            for (int polls = 1; !ep.send(address, size, sendDescriptor, peer, sendContexts.context(slot)); polls++) {
                if (poll() == 0) {
                    deadline = idle(polls, deadline, "room to send");
                }
            }
            busy[slot] = true;
            credits--;
        }

        private void awaitSlot(int slot) {
            long deadline = 0;
            for (int polls = 1; busy[slot]; polls++) {
                if (poll() == 0) {
                    deadline = idle(polls, deadline, "a send completion");
                }
            }
        }

        private long idle(int polls, long deadline, String what) {
            if ((polls & SPIN_MASK) == 0) {
                Thread.yield();
            }
            return (polls & CLOCK_MASK) == 0 ? checkDeadline(deadline, what) : deadline;
        }

        private long checkDeadline(long deadline, String what) {
            long now = System.nanoTime();
            if (deadline == 0) {
                return now + timeoutNanos;
            }
            if (now > deadline) {
                throw new FabricException("no " + what + " within " + spec.timeoutMillis() + " ms (credits " + credits
                        + ")");
            }
            return deadline;
        }

        private int poll() {
            int n = cq.read(batch);
            if (n == CompletionQueue.ERROR_AVAILABLE) {
                CompletionError error = cq.readError();
                throw new FabricException("error completion: " + error);
            }
            if (n == 0) {
                return 0;
            }
            long now = System.nanoTime();
            for (int i = 0; i < n; i++) {
                long context = batch.context(i);
                if ((batch.flags(i) & Fi.RECV) != 0) {
                    int c = creditContexts.slot(context);
                    credits += creditMemory.get(JAVA_LONG, (long) c * CREDIT_BYTES);
                    if (!ep.recv(creditMemory.address() + (long) c * CREDIT_BYTES, CREDIT_BYTES, creditDescriptor,
                            Fi.ADDR_UNSPEC, context)) {
                        throw new FabricException("could not repost a credit receive");
                    }
                    continue;
                }
                int slot = sendContexts.slot(context);
                if (slot < 0) {
                    continue;
                }
                busy[slot] = false;
                lastDone = now;
                if (timed[slot]) {
                    Measured.record(latency, now - sentAt[slot]);
                }
            }
            return n;
        }
    }

    // ------------------------------------------------------------------------------------------
    // Server

    /** Received messages, published now and then for the control thread. */
    static volatile long published;

    /**
     * Serves one client until {@code stop} says so: announces {@code READY <type> <hex>}, learns
     * the client's address ({@code PEER <hex>}, datagram endpoints) from {@code peers}, posts the
     * receives and reports {@code CONNECTED}, then receives and returns credits.
     */
    static void serve(StreamSpec spec, BlockingQueue<String> peers, java.util.function.BooleanSupplier stop)
            throws InterruptedException {
        int window = spec.effectiveWindow();
        long stride = stride(spec.size());
        try (Arena arena = Arena.ofShared();
             OperationContexts contexts = new OperationContexts(window);
             CompletionBatch batch = new CompletionBatch(BATCH);
             FabricSession session = openSession(spec, true, null, 2 * window + 64)) {
            EndpointType type = session.info().endpointType();
            MemorySegment memory = arena.allocate(window * stride, 4096);
            MemorySegment credit = arena.allocate(CREDIT_BYTES, 64);
            MemoryRegion region = session.domain().register(memory);
            long descriptor = region.descriptor();
            StreamServer.say(StreamServer.READY + " " + type + " " + HexFormat.of().formatHex(session.address()));
            Endpoint ep;
            long peer;
            if (type == EndpointType.RDM) {
                ep = session.sharedEndpoint();
                region.bind(ep);
                for (int i = 0; i < window; i++) {
                    postOrFail(ep, memory.address() + i * stride, spec.size(), descriptor, contexts.context(i));
                }
                String line = peers.poll(spec.timeoutMillis(), TimeUnit.MILLISECONDS);
                if (line == null) {
                    throw new IllegalStateException("the client sent no address within " + spec.timeoutMillis() + " ms");
                }
                peer = session.connect(HexFormat.of().parseHex(line), (int) spec.timeoutMillis()).peer();
            } else {
                FabricSession.Connection c = session.accept((int) spec.timeoutMillis(), e -> {
                    region.bind(e);
                    for (int i = 0; i < window; i++) {
                        postOrFail(e, memory.address() + i * stride, spec.size(), descriptor, contexts.context(i));
                    }
                });
                ep = c.endpoint();
                peer = c.peer();
            }
            StreamServer.say(StreamServer.CONNECTED);
            CompletionQueue cq = session.completionQueue();
            int creditBatch = Math.max(1, window / 4);
            long owed = 0;
            long received = 0;
            long loops = 0;
            int idle = 0;
            while ((++loops & 1023) != 0 || !stop.getAsBoolean()) {
                int n = cq.read(batch);
                if (n == CompletionQueue.ERROR_AVAILABLE) {
                    CompletionError error = cq.readError();
                    if (received == 0) {
                        throw new FabricException("error completion: " + error);
                    }
                    // The client closing its endpoint flushes what was posted: the stream is over.
                    if (!stop.getAsBoolean()) {
                        System.err.println("stream server: " + error + " after " + received + " messages");
                    }
                    return;
                }
                for (int i = 0; i < n; i++) {
                    if ((batch.flags(i) & Fi.RECV) == 0) {
                        continue;
                    }
                    long context = batch.context(i);
                    int slot = contexts.slot(context);
                    received++;
                    postOrFail(ep, memory.address() + slot * stride, spec.size(), descriptor, context);
                    owed++;
                }
                if (n > 0) {
                    published = received;
                    idle = 0;
                } else if ((++idle & SPIN_MASK) == 0) {
                    Thread.yield();
                }
                if (owed >= creditBatch) {
                    credit.set(JAVA_LONG, 0, owed);
                    if (ep.inject(credit.address(), Long.BYTES, peer)) {
                        owed = 0;
                    }
                }
            }
        }
    }

    private static void postOrFail(Endpoint ep, long address, long length, long descriptor, long context) {
        for (int tries = 0; !ep.recv(address, length, descriptor, Fi.ADDR_UNSPEC, context); tries++) {
            if (tries > 1_000_000) {
                throw new FabricException("the receive queue stays full");
            }
            Thread.onSpinWait();
        }
    }
}
