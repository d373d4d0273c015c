package dev.ferry.transport.fabric;

import dev.ferry.fabric.CompletionBatch;
import dev.ferry.fabric.CompletionError;
import dev.ferry.fabric.CompletionQueue;
import dev.ferry.fabric.EndpointType;
import dev.ferry.fabric.Fi;
import dev.ferry.memory.RegisteredBuffer;
import dev.ferry.transport.ProgressNice;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * The progress thread's duty cycle. It holds the {@link FabricToken}, the right to call
 * libfabric, while it works, and lends it while it spins, yields or sleeps, when an application
 * thread may take it to post its own send or poll for its reply ({@link CallerProgress}). Each turn it takes what other
 * threads handed over ({@link ProgressProxy}), drains the completion queue in batches and
 * dispatches each completion by its operation's kind, runs the timers (credit review,
 * connection events, quarantine), pumps the links with something to send and starts the
 * rendezvous pulls there is room for. With nothing to do it spins briefly, then polls while work
 * comes in dense bursts, then sleeps on its {@link Idler}, so an idle transport uses no CPU.
 */
final class ProgressLoop {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /** Completions read at once. */
    private static final int BATCH = 64;
    /** Hand-overs taken per turn, so that completions are not starved by a flood of sends. */
    private static final int COMMANDS_PER_TURN = 256;
    /** Idle progress: busy-polls this long after the last work before sleeping. */
    private static final long SPIN_NANOS = 20_000L;
    /** Idle stretches count at most this much in {@link #idleGap}, so one long pause fades fast. */
    private static final long MAX_GAP_SAMPLE_NANOS = 1_000_000L;
    /** Sleep slice while traffic is recent or this side's own operations are in flight. */
    private static final long PARK_NANOS = 50_000L;
    /** A spinning thread reads the clock once per this many idle turns. */
    private static final int SPIN_CLOCK_TURNS = 8;
    /** Sleep slices grow up to this once the transport is truly idle. */
    private static final long MAX_SLICE_NANOS = 1_000_000L;
    /** Traffic this recent keeps the sleep slice short. */
    private static final long RECENT_NANOS = 50_000_000L;

    private final FabricTransport transport;
    private final CompletionQueue cq;
    private final boolean sources;
    private final boolean connected;
    private final Thread thread;
    private final Idler idler;
    /** Who may call libfabric: this thread while it works, a caller while it lends it. */
    private final FabricToken token = new FabricToken();
    /** Whether the host has more runnable threads than cores: then an idle loop sleeps at once. */
    private final CpuPressure pressure = CpuPressure.open();
    /** Idle progress while work comes in dense bursts: keeps polling this long before sleeping. */
    private final long pollBudgetNanos;
    /** The nice value this thread asks for when it starts ({@link ProgressNice}). */
    private final int nice;
    private volatile boolean parked;
    /** Sleeping, without its wait object, while a caller polls. */
    private final PollingNap nap;
    /** Set once the shutdown freed fabric and memory: the token is free again, and useless. */
    private volatile boolean finished;
    private long loops;
    private long lastReview;
    private long lastWork = System.nanoTime();
    /**
     * Whether the idle strategy spun last: a spinning thread reads the clock for its timers every
     * 64 turns and for its spin's length every {@link #SPIN_CLOCK_TURNS} (a reading costs about
     * as much as the turn's poll), instead of twice a turn.
     */
    private boolean spun;
    /** Moving average (1/8) of the idle stretches between pieces of work. */
    private long idleGap = MAX_GAP_SAMPLE_NANOS;
    /**
     * Whether a posted send completes without this side's progress (shm copying straight between
     * the processes): then sends nobody waits for are reaped on the next turn of work or timer.
     */
    private final boolean sendsMoveAlone;

    ProgressLoop(FabricTransport transport, Doorbell doorbell, int nice) {
        this.transport = transport;
        this.cq = transport.cq;
        this.sources = transport.sources;
        this.connected = transport.type == EndpointType.MSG;
        this.pollBudgetNanos = transport.config.idlePollMicros() * 1_000L;
        this.nice = nice;
        this.thread = Thread.ofPlatform().daemon().unstarted(this::run);
        this.nap = new PollingNap(this);
        this.idler = cq.waitable() ? new CompletionQueueIdler(transport, this)
                : doorbell != null ? new DoorbellIdler(transport, this, doorbell) : new ParkIdler(this, thread);
        this.sendsMoveAlone = idler instanceof DoorbellIdler && ShmDirectCopy.likely();
    }

    Thread thread() {
        return thread;
    }

    void start(String name) {
        thread.setName(name);
        thread.start();
    }

    /** Whether the caller is the progress thread. */
    boolean inProgressThread() {
        return Thread.currentThread() == thread;
    }

    /** Whether the caller holds the fabric token: the progress thread at work, or a caller it lent it to. */
    boolean holdsFabric() {
        return token.heldByCurrentThread();
    }

    FabricToken token() {
        return token;
    }

    /** Whether the host has more runnable threads than cores, lately. */
    boolean overcommitted() {
        return pressure.overcommitted();
    }

    /** Gives the token to whoever wants it while this thread waits on something that is not libfabric. */
    void lend() {
        assert inProgressThread();
        token.release();
    }

    /** Takes the token back after {@link #lend}. */
    void takeBack() {
        token.acquire();
    }

    private void run() {
        ProgressNice.applyToCurrentThread(nice);
        CompletionBatch batch = new CompletionBatch(BATCH);
        int idle = 0;
        // Held to the end of the shutdown; after it, every holder finds the transport closed and
        // calls no libfabric: the token then only guards the last drain of hand-overs.
        token.acquire();
        try {
            while (!transport.isClosed()) {
                idle = turn(batch, idle);
            }
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.ERROR, "progress thread failed; the transport stops", t);
            for (FabricPeer peer : transport.peers.values()) {
                peer.fail(new TransportException(Reason.CLOSED, "transport progress failed: " + t, t));
            }
        } finally {
            pressure.close();
            try {
                transport.shutdown(batch);
            } finally {
                finished = true;
                token.release();
                transport.proxy.failAfterShutdown(); // what came in between the last drain and the flag
            }
        }
    }

    /**
     * One turn of the duty cycle: hand-overs, completions, timers, sends, pulls, and the idle
     * strategy when there was nothing to do; the idle count after it. A method of its own so that
     * the JIT compiles it by its invocations: the loop around it runs for the transport's life and
     * a progress thread that mostly sleeps would otherwise run this body interpreted for minutes
     * (on-stack replacement waits for tens of thousands of back-edges).
     */
    private int turn(CompletionBatch batch, int idle) {
        assert holdsFabric();
        int work = drainCommands();
        work += poll(batch);
        loops++;
        boolean timer = false;
        if ((loops & 63) == 0 || idle > 0 && !spun) {
            long now = System.nanoTime();
            if (now - lastReview >= CreditBalancer.REVIEW_NANOS) {
                timer = true;
                lastReview = now;
                work += transport.credits.review(now);
                pressure.sample();
            }
        }
        if (connected && (transport.links.connecting() || timer)) {
            transport.links.pollEvents();
        }
        if (timer && transport.ops.hasQuarantined()) {
            transport.ops.releaseQuarantined(System.nanoTime());
        }
        if (timer && transport.sends.awaited.hasLent()) {
            transport.sends.awaited.releaseLent(System.nanoTime(), false);
        }
        if (timer && transport.links.teardowns.holdsMappings()) {
            transport.links.teardowns.expireMappings(System.nanoTime());
        }
        if (timer && transport.links.closing()) {
            transport.links.closeOverdue(System.nanoTime(), false);
        }
        work += transport.sends.pump();
        work += transport.pulls.pull();
        if (work == 0) {
            return idle(idle, batch);
        }
        long now = System.nanoTime();
        if (idle > 0) {
            idleGap += (Math.min(now - lastWork, MAX_GAP_SAMPLE_NANOS) - idleGap) >> 3;
        }
        lastWork = now;
        return 0;
    }

    /** Takes what other threads handed over: the token's holder. */
    int drainCommands() {
        assert holdsFabric();
        int n = 0;
        Object command;
        while (n < COMMANDS_PER_TURN && (command = transport.proxy.poll()) != null) {
            n++;
            if (command instanceof OutboundFrame frame) {
                transport.sends.enqueue(frame);
            } else if (command instanceof InboundFrame frame) {
                transport.receives.repost(frame);
            } else {
                ((Runnable) command).run();
            }
        }
        transport.receives.retryReposts();
        return n;
    }

    /**
     * The idle strategy, by time since the last work. Where the host has more runnable threads
     * than cores ({@link CpuPressure}), spinning or polling would take a core from a thread with
     * work, and a wake-up costs less than that: it sleeps at once. Else it spins for {@link #SPIN_NANOS}, so that
     * a reply that follows at once costs no wake-up. While work comes in dense bursts (the
     * average idle stretch, {@link #idleGap}, is under {@link #pollBudgetNanos}), it keeps
     * polling, yielding the core between polls, up to that budget: a request-response exchange
     * then never waits for a wake-up. Past that, and at once where work arrives sparsely, it
     * sleeps on its {@link Idler}: one {@link #PARK_NANOS} slice while a thread waits for its own
     * operations to complete ({@link SendWindow#awaited}, links blocked on the window or
     * credits, pulls) or traffic is recent, growing slices up to 1 ms once the transport is truly idle.
     * While a caller polls for its reply, it naps instead ({@link PollingNap}).
     */
    private int idle(int idle, CompletionBatch batch) {
        boolean crowded = pressure.overcommitted();
        if (spun && idle % SPIN_CLOCK_TURNS != 0 && !crowded && !transport.callers.polling()) {
            return spin(idle); // still within the spin, give or take a few turns
        }
        spun = false;
        long now = System.nanoTime();
        long idleNanos = now - lastWork;
        if (transport.callers.polling()) {
            nap.take(now, transport.proxy);
            return idle + 1;
        }
        if (idleNanos < SPIN_NANOS && !crowded) {
            return spin(idle);
        }
        if (idleNanos < pollBudgetNanos && idleGap < pollBudgetNanos && !crowded) {
            lend();
            Thread.yield();
            takeBack();
            return idle + 1;
        }
        // Sends in flight that nobody waits for (replies, calls whose reply is awaited instead)
        // are reaped on the next turn of work or timer: a short slice for them alone would cost
        // a wake-up per answered request on shm, where this side's completions do not ring.
        // parked is set before the waiters are read: a thread that starts waiting for a send
        // (SendWindow.awaited) and then finds parked false is seen here; one that finds it true
        // rings, and the idler reads the waiters again once its wait object is armed.
        parked = true;
        boolean busy = awaitsCompletions() || transport.sends.blocked() || transport.pulls.busy()
                || transport.links.connecting() || transport.receives.retrying() || transport.links.closing();
        long slice = busy || idleNanos < RECENT_NANOS ? PARK_NANOS
                : Math.min(MAX_SLICE_NANOS, PARK_NANOS << Math.min(5, idle / 64));
        try {
            if (!transport.proxy.isEmpty()) {
                return idle + 1;
            }
            if (idler.sleep(batch, busy, slice) > 0) {
                // Work arrived while the thread slept: the idle stretch counts toward idleGap.
                long woke = System.nanoTime();
                idleGap += (Math.min(woke - lastWork, MAX_GAP_SAMPLE_NANOS) - idleGap) >> 3;
                lastWork = woke;
                return 0;
            }
        } finally {
            parked = false;
        }
        return idle + 1;
    }

    /** One turn of the spin: the token lent for a moment, so that a caller may post meanwhile. */
    private int spin(int idle) {
        lend();
        Thread.onSpinWait();
        takeBack();
        spun = true;
        return idle + 1;
    }

    /**
     * Whether a completion of this side's own sends must be reaped soon: a thread waits for one
     * ({@link SendWindow#awaited}), or, where a posted send may need this side's progress to move
     * on (any wait object but the shm doorbell with its direct copy, {@link ShmDirectCopy}), any
     * send is in flight. Progress thread.
     */
    boolean awaitsCompletions() {
        return transport.window.awaited() || (!sendsMoveAlone && transport.window.inFlight() > 0);
    }

    /** Wakes the progress thread if it sleeps: any thread, after handing something over. */
    void wake() {
        nap.wake();
        if (parked) {
            idler.wake();
        }
    }

    /**
     * A caller posted a send itself: wakes the progress thread from a long sleep on its wait
     * object, which the send's completion would not end, or from a long nap (a short one ends
     * soon enough).
     */
    void wakeForCompletions() {
        nap.wakeIfLong();
        if (parked) {
            idler.wake();
        }
    }

    /** Naps taken while callers polled, and the longest asked for in nanoseconds; for tests. */
    long[] napCounts() {
        return nap.counts();
    }

    /** Whether the progress thread has shut the transport down and stopped. */
    boolean finished() {
        return finished;
    }

    /** Wakes the progress thread whether or not it sleeps: the transport is closing. */
    void wakeToClose() {
        java.util.concurrent.locks.LockSupport.unpark(thread);
        idler.wake();
    }

    /** No wake touches the wait object from now on: it is about to be closed. */
    void closeIdler() {
        idler.close();
    }

    // ------------------------------------------------------------------------------------------
    // Completions

    /** Reads and handles a batch of completions; their number. */
    int poll(CompletionBatch batch) {
        return dispatch(batch, sources ? cq.readFrom(batch) : cq.read(batch));
    }

    /** Handles the {@code n} completions just read into {@code batch}, or the error waiting. */
    int dispatch(CompletionBatch batch, int n) {
        assert holdsFabric();
        if (n > 0) {
            transport.receives.batchAt(System.nanoTime());
        }
        if (n == CompletionQueue.ERROR_AVAILABLE) {
            CompletionError error = cq.readError();
            if (error != null) {
                onError(error);
            }
            return 1;
        }
        OperationTable ops = transport.ops;
        for (int i = 0; i < n; i++) {
            int slot = ops.slot(batch.context(i));
            if (slot < 0) {
                transport.counters.strayCompletions.increment();
                continue;
            }
            byte kind = ops.kind(slot);
            Object target = ops.target(slot);
            switch (kind) {
                case OperationTable.RECV -> {
                    Link link = ops.link(slot);
                    ops.release(slot);
                    transport.receives.onReceive((RegisteredBuffer) target, link, batch.length(i),
                            sources ? batch.source(i) : Fi.ADDR_UNSPEC);
                }
                case OperationTable.SEND_MESSAGE -> {
                    ops.release(slot);
                    transport.sends.outcomes.onMessageSent((OutboundFrame) target);
                }
                case OperationTable.SEND_CONTROL -> {
                    ops.release(slot);
                    transport.sends.onControlSent((RegisteredBuffer) target);
                }
                case OperationTable.READ -> {
                    long chunk = ops.bytes(slot);
                    ops.release(slot);
                    transport.pulls.onRead((InboundFrame) target, chunk);
                }
                case OperationTable.ORPHANED_READ -> {
                    Link link = ops.link(slot);
                    long chunk = ops.bytes(slot);
                    ops.release(slot);
                    transport.links.readEnded(link, (InboundFrame) target, chunk);
                }
                case OperationTable.ORPHANED_SEND -> {
                    ops.release(slot);
                    transport.sends.outcomes.onOrphanEnded((OutboundFrame) target);
                }
                case OperationTable.DEAD -> { }
                default -> {
                    transport.counters.strayCompletions.increment();
                    LOG.log(System.Logger.Level.WARNING, "completion for an idle context slot " + slot);
                }
            }
        }
        return n;
    }

    private void onError(CompletionError error) {
        OperationTable ops = transport.ops;
        int slot = ops.slot(error.context());
        if (slot < 0) {
            transport.counters.strayCompletions.increment();
            LOG.log(System.Logger.Level.WARNING, "error completion with an unknown context: " + error);
            return;
        }
        byte kind = ops.kind(slot);
        if (kind == OperationTable.DEAD) {
            return;
        }
        if (kind == OperationTable.FREE) {
            transport.counters.strayCompletions.increment();
            LOG.log(System.Logger.Level.WARNING, "error completion for an idle slot: " + error);
            return;
        }
        Object target = ops.target(slot);
        Link link = ops.link(slot);
        long bytes = ops.bytes(slot);
        ops.release(slot);
        String what = error.errnoName() + " " + error.message();
        LinkTable links = transport.links;
        switch (kind) {
            case OperationTable.RECV -> transport.receives.onReceiveFailed((RegisteredBuffer) target, link, what);
            case OperationTable.SEND_MESSAGE -> {
                transport.sends.outcomes.onMessageFailed((OutboundFrame) target, link,
                        new TransportException(Reason.PEER_FAILED, "send to " + link.peer.address() + " failed: " + what));
                links.linkFailure(link, "send failed: " + what);
            }
            case OperationTable.SEND_CONTROL -> {
                transport.sends.onControlSent((RegisteredBuffer) target);
                links.linkFailure(link, "control send failed: " + what);
            }
            case OperationTable.READ -> {
                transport.pulls.abandon((InboundFrame) target, bytes);
                links.linkFailure(link, "rendezvous read failed: " + what);
            }
            case OperationTable.ORPHANED_READ -> links.readEnded(link, (InboundFrame) target, bytes);
            case OperationTable.ORPHANED_SEND -> transport.sends.outcomes.onOrphanEnded((OutboundFrame) target);
            default -> LOG.log(System.Logger.Level.WARNING, "error completion for an idle slot: " + error);
        }
    }
}
