package dev.ferry.transport.fabric;

import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The only door from other threads to the progress thread, for threads that do not hold the
 * {@link FabricToken} (the right to call libfabric; see {@link CallerProgress}). A
 * thread hands over a send ({@link OutboundFrame}), a released receive ({@link InboundFrame})
 * or a task; the progress thread takes them in order with {@link #poll}.
 *
 * <p>Many threads offer, one polls ({@link ManyToOneArrayQueue}): allocation-free for frames.
 * While the queue is full a caller waits (back-pressure) and wakes the progress thread; the
 * token's holder (the progress thread, or a caller it lent the token to) never waits on the
 * queue, as only a holder drains it: it puts what does not fit in an overflow that only holders read.
 */
final class ProgressProxy {

    /**
     * Capacity of the command queue: far above what the progress thread drains in a turn, so
     * that only a flood of sends from many threads ever waits for room.
     */
    private static final int COMMANDS = 1 << 16;
    /** How long a caller waits for room in a full queue before it tries again. */
    private static final long FULL_PARK_NANOS = 50_000L;

    private final ManyToOneArrayQueue<Object> commands = new ManyToOneArrayQueue<>(COMMANDS);
    /** Commands the progress thread gives itself while {@link #commands} is full. */
    private final ArrayDeque<Object> overflow = new ArrayDeque<>();
    private final ProgressLoop loop;
    private final Thread progress;
    /** How long {@link #call} waits for the progress thread's answer. */
    private final long answerMillis;

    ProgressProxy(ProgressLoop loop, long answerMillis) {
        this.loop = loop;
        this.progress = loop.thread();
        this.answerMillis = answerMillis;
    }

    /** Whether the caller holds the fabric token (the progress thread at work, or a caller). */
    boolean holdsFabric() {
        return loop.holdsFabric();
    }

    /**
     * Hands {@code frame} to the progress thread to post; false (the caller fails it) if the
     * progress thread is gone and nothing would ever post it.
     */
    boolean send(OutboundFrame frame) {
        return offer(frame);
    }

    /** Hands back an eager message the application released: its buffer is reposted. */
    void release(InboundFrame message) {
        offer(message);
    }

    /** Runs {@code task} on the progress thread, later (in order with everything handed over). */
    void run(Runnable task) {
        offer(task);
    }

    /**
     * Runs {@code task} on the progress thread and returns its result, or throws what it threw.
     * On the token's holder it runs at once.
     */
    <T> T call(Supplier<T> task) {
        if (holdsFabric()) {
            return task.get();
        }
        CompletableFuture<T> result = new CompletableFuture<>();
        run(() -> {
            try {
                result.complete(task.get());
            } catch (Throwable t) {
                result.completeExceptionally(t);
            }
        });
        try {
            return result.get(answerMillis, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof RuntimeException r) {
                throw r;
            }
            throw new TransportException(TransportException.reasonOf(e.getCause(), Reason.CLOSED), e.getCause().toString(), e.getCause());
        } catch (TimeoutException e) {
            throw new TransportException(Reason.TIMEOUT, "the progress thread did not answer", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new TransportException(Reason.INTERRUPTED, "interrupted while waiting for the progress thread", e);
        }
    }

    private boolean offer(Object command) {
        if (holdsFabric()) {
            if (!overflow.isEmpty() || !commands.offer(command)) {
                overflow.add(command);
            }
            return true;
        }
        while (!commands.offer(command)) {
            if (!progress.isAlive()) {
                return false;
            }
            loop.wake();
            LockSupport.parkNanos(FULL_PARK_NANOS);
        }
        loop.wake();
        return true;
    }

    /** The next command, in the order handed over, or null: the token's holder. */
    Object poll() {
        assert holdsFabric();
        Object command = commands.poll();
        return command != null ? command : overflow.poll();
    }

    /**
     * Fails the sends handed over after the progress thread's last drain (a send that raced the
     * close), so that no future waits forever and no buffer stays taken; the progress thread has
     * {@link ProgressLoop#finished finished}. Whoever gets the token drains; one that does not
     * leaves it to the holder, and looks again after it.
     */
    void failAfterShutdown() {
        TransportException cause = new TransportException(Reason.CLOSED, "transport closed");
        FabricToken token = loop.token();
        while (!isEmpty()) {
            if (!token.tryAcquire()) {
                Thread.onSpinWait();
                continue;
            }
            try {
                for (Object command; (command = poll()) != null; ) {
                    if (command instanceof OutboundFrame frame) {
                        frame.free();
                        SendOutcomes.failFuture(frame, cause);
                    }
                }
            } finally {
                token.release();
            }
        }
    }

    /** Whether nothing waits for the progress thread. */
    boolean isEmpty() {
        return commands.isEmpty() && overflow.isEmpty();
    }
}
