package dev.ferry.bench.pingpong;

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
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.BooleanSupplier;
import org.HdrHistogram.Histogram;

import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * One side of a ping-pong straight on libfabric: one session, one peer, registered send and
 * receive buffers, and a busy-polled completion queue.
 *
 * <p>The data path allocates nothing: receives are posted ahead into {@value #RECEIVES} slots
 * and reposted right after the next send (off the critical path); messages up to the inject size
 * go by {@code fi_inject} (no send completion to reap); completions are read in batches into
 * one reused native array; state is primitive fields. Messages of 8 bytes or more carry the
 * round-trip number in their first 8 bytes, which the server echoes and the client checks.
 *
 * <p>Owned by one thread.
 */
public final class FabricPingPong implements AutoCloseable {

    /** Receives posted ahead: one would do for a strict ping-pong; more keep a late repost harmless. */
    static final int RECEIVES = 4;
    /** Sends in flight at most (only messages above the inject size have completions to wait for). */
    static final int SENDS = 4;
    /** Round trips per call of the inner loop (see {@link #runClient}). */
    static final int CHUNK = 128;
    /** Completions read per {@code fi_cq_read}. */
    private static final int BATCH = 16;
    /** Empty polls between looks at the clock. */
    private static final int CLOCK_MASK = (1 << 12) - 1;
    /** Round trips above this are recorded as this: a stall that long is a failure report anyway. */
    static final long HIGHEST_NANOS = 60_000_000_000L;

    private final FabricSession session;
    private final CompletionQueue cq;
    private final CompletionBatch batch = new CompletionBatch(BATCH);
    private final OperationContexts recvContexts = new OperationContexts(RECEIVES);
    private final OperationContexts sendContexts = new OperationContexts(SENDS);
    private final Arena arena = Arena.ofShared();
    private final int size;
    private final long slotBytes;
    private final MemorySegment recvMemory;
    private final MemorySegment sendMemory;
    private final long recvBase;
    private final long sendBase;
    private final MemoryRegion recvRegion;
    private final MemoryRegion sendRegion;
    private final boolean inject;

    private Endpoint endpoint;
    private long peer;

    /** Slots whose receive completed and that are not yet reposted, in arrival order. */
    private final int[] arrived = new int[RECEIVES];
    private int arrivedHead;
    private int arrivedCount;
    private final long[] lengths = new long[RECEIVES];
    private long received;
    private int sendsInFlight;
    private int nextSendContext;
    /** When the round trip about to start started: the end of the previous one. */
    private long lastStamp;

    private FabricPingPong(FabricSession session, int size) {
        this.session = session;
        this.cq = session.completionQueue();
        this.size = size;
        this.slotBytes = Math.max(64, (size + 63L) & ~63L);
        this.recvMemory = arena.allocate(slotBytes * RECEIVES, 4096);
        this.sendMemory = arena.allocate(slotBytes, 4096);
        this.recvBase = recvMemory.address();
        this.sendBase = sendMemory.address();
        this.recvRegion = session.domain().register(recvMemory);
        this.sendRegion = session.domain().register(sendMemory);
        this.inject = size <= session.domain().injectSize();
        for (long i = 0; i < slotBytes; i++) {
            sendMemory.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) i);
        }
    }

    /**
     * Opens {@code provider} on 127.0.0.1 for one peer, listening when {@code listen} and the
     * type is MSG.
     */
    public static FabricPingPong open(String provider, EndpointType type, int size, boolean listen) {
        FabricSession session = FabricSession.open(provider, type, host(provider), listen, 256);
        try {
            long max = session.info().maxMessageSize();
            if (max > 0 && size > max) {
                throw new IllegalArgumentException("size " + size + " exceeds " + provider + "'s largest message ("
                        + max + " B)");
            }
            return new FabricPingPong(session, size);
        } catch (RuntimeException e) {
            session.close();
            throw e;
        }
    }

    /**
     * The host to open {@code provider} on. Network providers get 127.0.0.1. shm takes the host
     * as the name of its shared-memory region ({@code <host>:<ep>:<...>}), so every process on the
     * host would get the same name and the second one's {@code fi_enable} fails with EBUSY ("shm
     * file in use"); a name of this process's own keeps them apart.
     */
    static String host(String provider) {
        return provider.equals("shm") ? "ferry-" + ProcessHandle.current().pid() : "127.0.0.1";
    }

    /** The bytes a peer needs to reach this side. */
    public byte[] address() {
        return session.address();
    }

    /** The endpoint type of the session. */
    public EndpointType type() {
        return session.info().endpointType();
    }

    /** The provider's name for itself, such as {@code tcp;ofi_rxm}. */
    public String providerName() {
        return session.info().provider();
    }

    /** Whether messages go by {@code fi_inject}. */
    public boolean injects() {
        return inject;
    }

    /**
     * Reaches the peer at {@code peerAddress}: a MSG connection, or an address-vector entry on
     * RDM; then posts the receives.
     */
    public void connect(byte[] peerAddress, int timeoutMillis) {
        FabricSession.Connection connection = session.connect(peerAddress, timeoutMillis);
        attach(connection.endpoint(), connection.peer());
        postReceives();
    }

    /** Accepts the peer's MSG connection, with the receives posted before the accept. */
    public void accept(int timeoutMillis) {
        FabricSession.Connection connection = session.accept(timeoutMillis, ep -> {
            attach(ep, Fi.ADDR_UNSPEC);
            postReceives();
        });
        peer = connection.peer();
    }

    private void attach(Endpoint ep, long peerHandle) {
        this.endpoint = ep;
        this.peer = peerHandle;
        recvRegion.bind(ep);
        sendRegion.bind(ep);
    }

    private void postReceives() {
        for (int slot = 0; slot < RECEIVES; slot++) {
            long deadline = System.nanoTime() + 10_000_000_000L;
            while (!postReceive(slot)) {
                progress();
                if (System.nanoTime() > deadline) {
                    throw new FabricException("could not post receives: the queue stayed full for 10 s");
                }
            }
        }
    }

    private boolean postReceive(int slot) {
        return endpoint.recv(recvBase + slot * slotBytes, slotBytes, recvRegion.descriptor(), peer,
                recvContexts.context(slot));
    }

    /**
     * Runs the client: warm-up round trips until both {@code minWarmup} of them and
     * {@code warmupNanos} have passed, then {@code onTimed}, then {@code iterations} timed round
     * trips recorded in nanoseconds into {@code histogram}.
     *
     * <p>Warm-up and timed round trips run the same short loop, {@value #CHUNK} round trips per
     * call, so that the JIT compiles it as a whole method whose every path (loop exit included)
     * the warm-up has taken. One long loop per phase would be compiled on-stack with its exit never
     * seen; leaving the warm-up would deoptimize it and leave the timed round trips interpreted
     * while the compiler threads take turns with the pollers on the CPUs. The warm-up is also
     * timed, since the compiler keeps working for a while after the loop first runs compiled.
     *
     * @param timeoutNanos how long to wait for any one reply
     * @param peerAlive asked now and then while waiting; false ends the run with an error
     * @param onTimed called once between warm-up and timed round trips
     */
    public ClientRun runClient(long minWarmup, long warmupNanos, int iterations, Histogram histogram,
            long timeoutNanos, BooleanSupplier peerAlive, Runnable onTimed) {
        Allocation.currentThread(); // loads the JVM's counter before anything is timed
        long warmupStart = System.nanoTime();
        lastStamp = warmupStart;
        long i = 0;
        while (i < minWarmup || System.nanoTime() - warmupStart < warmupNanos) {
            roundTrips(i, i + CHUNK, histogram, timeoutNanos, peerAlive);
            i += CHUNK;
        }
        long warmup = i;
        onTimed.run();
        // The warm-up recorded too, so that recording is compiled before it counts.
        histogram.reset();
        long total = warmup + iterations;
        long allocatedBefore = Allocation.currentThread();
        lastStamp = System.nanoTime();
        for (; i < total; i += CHUNK) {
            roundTrips(i, Math.min(i + CHUNK, total), histogram, timeoutNanos, peerAlive);
        }
        long allocatedAfter = Allocation.currentThread();
        repostArrived();
        return new ClientRun(warmup, allocatedBefore < 0 || allocatedAfter < 0 ? -1 : allocatedAfter - allocatedBefore);
    }

    /**
     * What a client run did besides the histogram.
     *
     * @param warmupRoundTrips warm-up round trips run
     * @param allocatedBytes bytes the client thread allocated during the timed round trips, or -1
     *     if the JVM cannot tell
     */
    public record ClientRun(long warmupRoundTrips, long allocatedBytes) {
    }

    /**
     * Round trips {@code from} to {@code to}. One clock read per round trip: a round trip runs
     * from just before its send to just before the next one's (the reply checked and recorded in
     * between), as {@code fi_pingpong} counts it (its total time over its iterations). A second
     * read per round trip would add its cost, about 50 ns on this VM, to what is measured.
     */
    private void roundTrips(long from, long to, Histogram histogram, long timeoutNanos, BooleanSupplier peerAlive) {
        long start = lastStamp;
        for (long i = from; i < to; i++) {
            if (size >= Long.BYTES) {
                sendMemory.set(JAVA_LONG_UNALIGNED, 0, i);
            }
            sendMessage();
            repostArrived();
            awaitReceive(i, start, timeoutNanos, peerAlive);
            checkReply(i);
            long now = System.nanoTime();
            histogram.recordValue(Math.min(now - start, HIGHEST_NANOS));
            start = now;
        }
        lastStamp = start;
    }

    private void awaitReceive(long i, long start, long timeoutNanos, BooleanSupplier peerAlive) {
        int idle = 0;
        while (received <= i) {
            if (progress() == 0 && (++idle & CLOCK_MASK) == 0) {
                if (System.nanoTime() - start > timeoutNanos) {
                    throw new FabricException("no reply to round trip " + i + " within "
                            + timeoutNanos / 1_000_000 + " ms");
                }
                if (!peerAlive.getAsBoolean()) {
                    throw new FabricException("the server went away during round trip " + i);
                }
            }
        }
    }

    private void checkReply(long i) {
        int slot = arrived[(arrivedHead + arrivedCount - 1) % RECEIVES];
        if (lengths[slot] != size) {
            throw new FabricException("reply " + i + " has " + lengths[slot] + " bytes, expected " + size);
        }
        if (size >= Long.BYTES) {
            long echoed = recvMemory.get(JAVA_LONG_UNALIGNED, slot * slotBytes);
            if (echoed != i) {
                throw new FabricException("reply " + i + " echoes round trip " + echoed);
            }
        }
    }

    /**
     * Serves as the server until {@code control} says stop: each message is answered with one of
     * the same size carrying its first 8 bytes back. Messages are served {@value #CHUNK} per call
     * of the inner loop, for the reasons given at {@link #runClient}; allocation is counted from
     * the first chunk after {@code control} reports the timed phase.
     *
     * @return messages served since the timed phase began and bytes this thread allocated
     *     meanwhile (-1 if unknown)
     */
    public ServerRun serve(ServerControl control) {
        Allocation.currentThread(); // loads the JVM's counter before anything is timed
        long served = 0;
        long mark = -1;
        long allocatedBefore = -1;
        while (true) {
            if (mark < 0 && control.timed()) {
                mark = served;
                allocatedBefore = Allocation.currentThread();
            }
            long n = serveMessages(served, served + CHUNK, control);
            served += n;
            if (n < CHUNK) {
                break;
            }
        }
        long allocatedAfter = Allocation.currentThread();
        return new ServerRun(mark < 0 ? 0 : served - mark,
                allocatedBefore < 0 || allocatedAfter < 0 ? -1 : allocatedAfter - allocatedBefore);
    }

    /**
     * What a server run did.
     *
     * @param timedMessages messages answered in the timed phase
     * @param allocatedBytes bytes the serving thread allocated meanwhile, or -1 if unknown
     */
    public record ServerRun(long timedMessages, long allocatedBytes) {
    }

    /** Serves messages {@code from} to {@code to}; returns how many, fewer when stopped. */
    private long serveMessages(long from, long to, ServerControl stop) {
        long served = from;
        while (served < to) {
            if (progress() == 0) {
                if (stop.stopped()) {
                    break;
                }
                continue;
            }
            while (arrivedCount > 0 && served < to) {
                int slot = arrived[arrivedHead];
                if (lengths[slot] != size) {
                    throw new FabricException("message " + served + " has " + lengths[slot] + " bytes, expected " + size);
                }
                if (size >= Long.BYTES) {
                    sendMemory.set(JAVA_LONG_UNALIGNED, 0, recvMemory.get(JAVA_LONG_UNALIGNED, slot * slotBytes));
                }
                sendMessage();
                arrivedHead = (arrivedHead + 1) % RECEIVES;
                arrivedCount--;
                repost(slot);
                served++;
            }
        }
        return served - from;
    }

    private void sendMessage() {
        if (inject) {
            while (!endpoint.inject(sendBase, size, peer)) {
                progress();
            }
            return;
        }
        while (sendsInFlight >= SENDS || !endpoint.send(sendBase, size, sendRegion.descriptor(), peer,
                sendContexts.context(nextSendContext))) {
            progress();
        }
        sendsInFlight++;
        nextSendContext = (nextSendContext + 1) % SENDS;
    }

    private void repostArrived() {
        while (arrivedCount > 0) {
            int slot = arrived[arrivedHead];
            arrivedHead = (arrivedHead + 1) % RECEIVES;
            arrivedCount--;
            repost(slot);
        }
    }

    private void repost(int slot) {
        while (!postReceive(slot)) {
            progress();
        }
    }

    /** Reads one batch of completions; returns how many. */
    private int progress() {
        int n = cq.read(batch);
        if (n == CompletionQueue.ERROR_AVAILABLE) {
            CompletionError error = cq.readError();
            throw error == null ? new FabricException("error completion vanished") : error.toException("ping-pong");
        }
        for (int k = 0; k < n; k++) {
            long flags = batch.flags(k);
            if ((flags & Fi.RECV) != 0) {
                int slot = recvContexts.slot(batch.context(k));
                if (slot < 0) {
                    throw new FabricException("receive completion with an unknown context");
                }
                lengths[slot] = batch.length(k);
                arrived[(arrivedHead + arrivedCount) % RECEIVES] = slot;
                arrivedCount++;
                received++;
            } else if ((flags & Fi.SEND) != 0) {
                sendsInFlight--;
            }
        }
        return n;
    }

    /** Closes the session, then frees the memory it used. */
    @Override
    public void close() {
        try {
            session.close();
        } finally {
            batch.close();
            recvContexts.close();
            sendContexts.close();
            arena.close();
        }
    }

    /** What the serving loop learns from the client between messages; read once per empty poll. */
    public interface ServerControl {
        /** Whether the client is done or gone. */
        boolean stopped();

        /** Whether the client has started its timed round trips. */
        boolean timed();
    }
}
