package dev.ferry.transport.admission;

import java.io.EOFException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * Admission of connections that have not yet proved the shared secret, for every listening
 * port that runs a handshake (the fabric transports' control channel, the Netty port).
 *
 * <p>An unauthenticated connection costs the server a socket and a little memory, nothing more,
 * and only for a short while:
 * <ul>
 *   <li><b>A deadline for the whole handshake</b> ({@code TransportConfig.handshakeTimeoutMillis},
 *       2 s by default), not per read: a silent peer and one that trickles a byte a second are
 *       closed alike when it passes.</li>
 *   <li><b>Pending handshakes per source address and in all</b> are bounded. A newcomer is never
 *       refused: when its source (or the whole port) is at the bound, the <em>oldest</em> pending
 *       handshake of that source (or of the port) is dropped instead. A good client finishes its
 *       handshake in a few round trips, so a flood of bad connections from its own address
 *       cannot keep it out; it can only cut off connections that have already waited longest.</li>
 *   <li><b>Slots for the expensive part</b>: what follows authentication (links, registrations on
 *       the progress thread) takes one of a few slots, waiting for one if need be. Only peers
 *       that proved the secret ever hold or wait for a slot, so bad connections cannot take
 *       them from good clients.</li>
 *   <li><b>A reason for every dropped connection</b>, logged through a rate-limited
 *       {@link DropLog}.</li>
 * </ul>
 *
 * <p>Thread-safe: tickets are admitted by an acceptor thread or event loop and finished by the
 * handshake's own thread; deadlines fire on a shared timer thread, or on the event loop that
 * reads the connection.
 */
public final class HandshakeGate {

    /** Pending handshakes per source address before the oldest is dropped. */
    public static final int DEFAULT_PER_SOURCE = 1024;
    /** Pending handshakes in all before the oldest is dropped. */
    public static final int DEFAULT_PENDING = 8192;

    private final long deadlineNanos;
    private final int perSource;
    private final int maxPending;
    private final Semaphore slots;
    private final long slotWaitMillis;
    private final DropLog log;
    // Guarded by this.
    private final LinkedHashSet<Ticket> pending = new LinkedHashSet<>();
    private final Map<InetAddress, ArrayDeque<Ticket>> bySource = new HashMap<>();
    private long evicted;
    private long expired;

    /**
     * A gate.
     *
     * @param log            where dropped connections are reported
     * @param deadlineMillis the time a connection has to authenticate, from its accept
     * @param perSource      pending handshakes per source address at most
     * @param maxPending     pending handshakes in all at most
     * @param slots          authenticated handshakes served at once; 0 for no slots
     * @param slotWaitMillis how long an authenticated handshake waits for a slot
     */
    public HandshakeGate(DropLog log, long deadlineMillis, int perSource, int maxPending, int slots, long slotWaitMillis) {
        if (deadlineMillis <= 0 || perSource <= 0 || maxPending <= 0 || slots < 0) {
            throw new IllegalArgumentException("bad handshake gate: deadline " + deadlineMillis + " ms, perSource "
                    + perSource + ", maxPending " + maxPending + ", slots " + slots);
        }
        this.log = log;
        this.deadlineNanos = TimeUnit.MILLISECONDS.toNanos(deadlineMillis);
        this.perSource = perSource;
        this.maxPending = maxPending;
        this.slots = slots == 0 ? null : new Semaphore(slots, true);
        this.slotWaitMillis = slotWaitMillis;
    }

    /** A gate with the default bounds. */
    public HandshakeGate(DropLog log, long deadlineMillis, int slots, long slotWaitMillis) {
        this(log, deadlineMillis, DEFAULT_PER_SOURCE, DEFAULT_PENDING, slots, slotWaitMillis);
    }

    /** Admits a blocking socket just accepted; the deadline closes it. */
    public Ticket admit(Socket socket) {
        return admit(socket.getInetAddress(), String.valueOf(socket.getRemoteSocketAddress()), () -> {
            try {
                socket.close();
            } catch (IOException e) {
                // closing anyway
            }
        });
    }

    /**
     * Admits a connection from {@code source} ({@code remote} names it in logs); {@code close}
     * closes it from any thread. Drops the oldest pending connection of the source, or of the
     * gate, if either is at its bound.
     */
    public Ticket admit(InetAddress source, String remote, Runnable close) {
        return admit(source, remote, close, null);
    }

    /**
     * Admits a connection whose reads are served by {@code timer} (an event loop): its deadline
     * fires on that executor, so the connection is dropped in a turn of the loop that reads it,
     * after the reads of that turn. A loop too busy to read a handshake frame that has arrived
     * then does not blame the peer for the wait: a good client is not closed while its proof
     * sits unread in the socket. A silent or trickling peer is dropped at the deadline as ever.
     * With a null {@code timer}, the deadline fires on the gate's shared timer thread.
     */
    public Ticket admit(InetAddress source, String remote, Runnable close, ScheduledExecutorService timer) {
        Ticket ticket = new Ticket(source, remote, close);
        Ticket victim = null;
        String why = null;
        synchronized (this) {
            ArrayDeque<Ticket> ofSource = bySource.computeIfAbsent(source, s -> new ArrayDeque<>());
            if (ofSource.size() >= perSource) {
                victim = ofSource.peekFirst();
                why = perSource + " handshakes pending from " + source + ", the oldest goes";
            } else if (pending.size() >= maxPending) {
                victim = pending.iterator().next();
                why = maxPending + " handshakes pending in all, the oldest goes";
            }
            if (victim != null) {
                forget(victim);
                victim.state = State.DROPPED;
                evicted++;
            }
            pending.add(ticket);
            ofSource.addLast(ticket);
        }
        if (victim != null) {
            victim.close("evicted", why);
        }
        ScheduledFuture<?> deadline = null;
        if (timer != null) {
            try {
                deadline = timer.schedule(ticket::expire, deadlineNanos, TimeUnit.NANOSECONDS);
            } catch (RejectedExecutionException e) {
                // the loop is shutting down: the shared timer still closes the connection
            }
        }
        ticket.deadline = deadline != null ? deadline : Deadlines.schedule(ticket::expire, deadlineNanos);
        return ticket;
    }

    /** The log of dropped connections. */
    public DropLog dropLog() {
        return log;
    }

    /** Handshakes waiting to authenticate now. */
    public synchronized int pending() {
        return pending.size();
    }

    /** Connections dropped so far because newer ones came from their source (or in all). */
    public synchronized long evicted() {
        return evicted;
    }

    /** Connections dropped so far at their deadline. */
    public synchronized long expired() {
        return expired;
    }

    /** Under the lock: {@code ticket} no longer counts as pending. */
    private void forget(Ticket ticket) {
        pending.remove(ticket);
        ArrayDeque<Ticket> ofSource = bySource.get(ticket.source);
        if (ofSource != null) {
            ofSource.remove(ticket);
            if (ofSource.isEmpty()) {
                bySource.remove(ticket.source);
            }
        }
    }

    private enum State { PENDING, AUTHENTICATED, SLOTTED, DROPPED, DONE }

    /** One admitted connection, from its accept until its handshake ends. */
    public final class Ticket {

        private final InetAddress source;
        private final String remote;
        private final Runnable closer;
        private volatile ScheduledFuture<?> deadline;
        // Guarded by the gate.
        private State state = State.PENDING;

        private Ticket(InetAddress source, String remote, Runnable closer) {
            this.source = source;
            this.remote = remote;
            this.closer = closer;
        }

        /**
         * The peer proved the secret: the deadline and the bounds stop applying, and the ticket
         * takes a slot (waiting for one if the gate has slots). False if the connection was
         * dropped meanwhile (deadline, eviction) or no slot came free in time (then dropped here).
         */
        public boolean authenticated() {
            synchronized (HandshakeGate.this) {
                if (state != State.PENDING) {
                    return false;
                }
                forget(this);
                state = State.AUTHENTICATED;
            }
            cancelDeadline();
            if (slots == null) {
                return true;
            }
            boolean got;
            try {
                got = slots.tryAcquire(slotWaitMillis, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                got = false;
            }
            synchronized (HandshakeGate.this) {
                if (got && state == State.AUTHENTICATED) {
                    state = State.SLOTTED;
                    return true;
                }
            }
            if (got) {
                slots.release();
            }
            drop("busy", "no handshake slot came free within " + slotWaitMillis + " ms");
            return false;
        }

        /** Whether the connection is still wanted (not dropped by its deadline or an eviction). */
        public boolean alive() {
            synchronized (HandshakeGate.this) {
                return state != State.DROPPED;
            }
        }

        /** Drops the connection with a reason: logs it (rate limited) and closes it. */
        public void drop(String kind, String reason) {
            if (end(State.DROPPED)) {
                close(kind, reason);
            }
        }

        /**
         * The handshake failed with {@code cause}: drops the connection with the reason the
         * exception tells, unless it was dropped already (a deadline closing the socket makes
         * the read fail: the deadline is the reason, already logged).
         */
        public void failed(Throwable cause) {
            if (end(State.DROPPED)) {
                close(kindOf(cause), reasonOf(cause));
            }
        }

        /**
         * The handshake ended, well or after a refusal its caller logged: frees the slot and the
         * pending place, closes nothing.
         */
        public void finished() {
            end(State.DONE);
        }

        /** Moves to {@code to} from a live state; true if this call did. Frees what is held. */
        private boolean end(State to) {
            State was;
            synchronized (HandshakeGate.this) {
                was = state;
                if (was == State.DROPPED || was == State.DONE) {
                    return false;
                }
                if (was == State.PENDING) {
                    forget(this);
                }
                state = to;
            }
            cancelDeadline();
            if (was == State.SLOTTED) {
                slots.release();
            }
            return true;
        }

        private void expire() {
            synchronized (HandshakeGate.this) {
                if (state != State.PENDING) {
                    return;
                }
                forget(this);
                state = State.DROPPED;
                expired++;
            }
            close("deadline", "no handshake within " + TimeUnit.NANOSECONDS.toMillis(deadlineNanos) + " ms");
        }

        private void cancelDeadline() {
            ScheduledFuture<?> d = deadline;
            if (d != null) {
                d.cancel(false);
            }
        }

        private void close(String kind, String reason) {
            log.drop(kind, remote + ": " + reason);
            closer.run();
        }

        @Override
        public String toString() {
            return "handshake from " + remote;
        }
    }

    /** The kind of a handshake failure, for the summary of {@link DropLog}. */
    static String kindOf(Throwable cause) {
        if (cause instanceof EOFException || cause instanceof SocketException) {
            return "closed";
        }
        if (cause instanceof SocketTimeoutException) {
            return "deadline";
        }
        return "garbage";
    }

    /** What a handshake failure means, in words; never "null". */
    public static String reasonOf(Throwable cause) {
        if (cause instanceof EOFException) {
            return "closed the connection in the middle of the handshake";
        }
        if (cause instanceof SocketTimeoutException) {
            return "sent nothing for too long during the handshake";
        }
        String message = cause.getMessage();
        if (cause instanceof SocketException) {
            return "connection failed during the handshake (" + (message != null ? message : "socket error") + ")";
        }
        return message != null ? message : cause.getClass().getSimpleName();
    }
}
