package dev.ferry.transport.fabric;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.CompletionQueue;

/**
 * Where the completion queue has a wait object that sleeps (tcp, verbs): blocks in the kernel
 * until a completion arrives, a hand-over signals the queue, or the next timer is due (1 ms
 * while connections are being made or receives wait to be posted again). The wait is a
 * libfabric call, so the progress thread keeps the {@link FabricToken} through it: callers hand
 * their sends over meanwhile, and the hand-over's signal ends the wait.
 */
final class CompletionQueueIdler implements Idler {

    private final FabricTransport transport;
    private final ProgressLoop loop;
    private final CompletionQueue cq;
    private final boolean sources;
    /** Guarded by this: no thread signals the queue once it is closed. */
    private boolean closed;

    CompletionQueueIdler(FabricTransport transport, ProgressLoop loop) {
        this.transport = transport;
        this.loop = loop;
        this.cq = transport.cq;
        this.sources = transport.sources;
    }

    @Override
    public int sleep(CompletionBatch batch, boolean busy, long sliceNanos) {
        int millis = transport.links.connecting() || transport.receives.retrying() ? 1
                : (int) (CreditBalancer.REVIEW_NANOS / 1_000_000L);
        return loop.dispatch(batch, sources ? cq.awaitFrom(batch, millis) : cq.await(batch, millis));
    }

    /** Signals the queue ({@code fi_cq_signal}: the one libfabric call made for other threads, and thread-safe). */
    @Override
    public synchronized void wake() {
        if (!closed) {
            cq.signal();
        }
    }

    @Override
    public synchronized void close() {
        closed = true;
    }
}
