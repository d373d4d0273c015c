package dev.ferry.transport;

/**
 * One local endpoint of a transport: it accepts peers that connect to {@link #localAddress()}
 * and connects to others. Inbound messages go to the {@link MessageHandler} given at
 * {@link Transports#open}, on the transport's progress thread.
 */
public interface Transport extends AutoCloseable {

    /** The address peers pass to {@link #connect}, such as {@code 127.0.0.1:40123}. */
    String localAddress();

    /**
     * Returns the peer at {@code address}, connecting first if needed. Blocks until the first
     * link is up or {@link TransportConfig#connectTimeoutMillis()} passes.
     *
     * @throws TransportException if the peer cannot be reached
     */
    Peer connect(String address);

    /** A consistent-enough snapshot of this transport's counters. */
    TransportCounters counters();

    /** The provider it runs on ({@code shm}, {@code tcp}, {@code netty}, ...), for metrics tags and logs. */
    default String provider() {
        return "unknown";
    }

    /** A snapshot of its registered-memory allocator, where it has one (fabric transports). */
    default java.util.Optional<dev.ferry.memory.AllocatorStats> allocatorStats() {
        return java.util.Optional.empty();
    }

    /**
     * Lends the calling thread to the transport while it waits, at most {@code nanos}, for
     * {@code done} (a reply whose arrival completes it): a transport that can lets the thread
     * poll for completions itself, so that a reply that comes soon costs no thread hand-off and
     * no wake-up. Returns whether {@code done} is done; the caller then waits as usual. The
     * default returns at once.
     */
    default boolean awaitPolling(java.util.concurrent.Future<?> done, long nanos) {
        return done.isDone();
    }

    /**
     * Closes every link and frees every buffer; messages not yet delivered fail their futures.
     * Segments of messages the application still holds throw {@link IllegalStateException} from
     * then on; calls on the transport and its peers throw {@link TransportException} with reason
     * {@code CLOSED}.
     */
    @Override
    void close();
}
