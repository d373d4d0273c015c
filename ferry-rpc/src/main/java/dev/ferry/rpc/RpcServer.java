package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Peer;
import dev.ferry.transport.SharedSecret;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Serves registered methods on one or more transports (typically a fabric transport and the
 * Netty TCP fallback, so that clients can move between them).
 *
 * <p>Frames arrive on each transport's progress thread. Control frames (heartbeats,
 * authentication) and {@linkplain RpcMethod#nonBlocking() non-blocking} methods are handled
 * there; other handlers run on the handler executor. A request holds its receive buffer until
 * its handler returns, so a busy server slows its clients through the transport's receive
 * credits instead of queueing without bound.
 *
 * <p>Non-idempotent methods go through the {@link DedupeTable}: a call retried after a failure
 * (same client id and call id) runs at most once, and the retry gets the stored response.
 */
public final class RpcServer implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.rpc.server");
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final ThreadLocal<boolean[]> ON_PROGRESS_THREAD = ThreadLocal.withInitial(() -> new boolean[1]);

    private final RpcConfig config;
    private final SharedSecret secret;
    private final Executor executor;
    private final ExecutorService ownedExecutor;
    private final ScheduledExecutorService sweeper;
    private final long epoch;
    private final MethodTable<Registration> methods = new MethodTable<>();
    private final ServerSessions sessions;
    private final ConcurrentHashMap<CallKey, ServerCall> running = new ConcurrentHashMap<>();
    private final List<Transport> transports = new CopyOnWriteArrayList<>();
    private final DedupeTable dedupe;
    private final Handler handler = new Handler();
    private volatile boolean closed;
    private volatile RpcObserver observer = RpcObserver.NONE;

    private final LongAdder requests = new LongAdder();
    private final LongAdder executions = new LongAdder();
    private final LongAdder replays = new LongAdder();
    private final LongAdder duplicatesWhileRunning = new LongAdder();
    private final LongAdder outcomesLost = new LongAdder();
    private final LongAdder handlerErrors = new LongAdder();
    private final LongAdder deadlinesMissed = new LongAdder();

    private record Registration(RpcMethod method, RpcHandler handler) {
    }

    private record CallKey(long clientId, long callId) {
    }

    private RpcServer(RpcConfig config, Executor executor) {
        this.config = config;
        this.secret = config.secret().resolve();
        this.sessions = new ServerSessions(secret, this::sendControl);
        if (executor == null) {
            AtomicInteger n = new AtomicInteger();
            this.ownedExecutor = Executors.newFixedThreadPool(config.handlerThreads(),
                    r -> Thread.ofPlatform().daemon().name("ferry-rpc-handler-" + n.incrementAndGet()).unstarted(r));
            this.executor = ownedExecutor;
        } else {
            this.ownedExecutor = null;
            this.executor = executor;
        }
        long e;
        do {
            e = RANDOM.nextLong();
        } while (e == 0);
        this.epoch = e;
        this.dedupe = new DedupeTable(config.dedupeEntriesPerClient(), config.dedupeBytesPerClient(),
                TimeUnit.MILLISECONDS.toNanos(config.clientStateTtlMillis()));
        this.sweeper = Executors.newSingleThreadScheduledExecutor(
                r -> Thread.ofPlatform().daemon().name("ferry-rpc-server-sweeper").unstarted(r));
        long every = Math.max(1_000, config.clientStateTtlMillis() / 10);
        sweeper.scheduleAtFixedRate(() -> dedupe.expire(System.nanoTime()), every, every, TimeUnit.MILLISECONDS);
    }

    /** A server whose handlers run on a pool of {@link RpcConfig#handlerThreads()} threads. */
    public static RpcServer open(RpcConfig config) {
        return new RpcServer(config, null);
    }

    /** A server whose blocking handlers run on {@code executor} (which it does not shut down). */
    public static RpcServer open(RpcConfig config, Executor executor) {
        return new RpcServer(config, Objects.requireNonNull(executor, "executor"));
    }

    /**
     * Serves {@code method} with {@code handler}.
     *
     * @throws IllegalStateException if a method of the same id is registered already (two
     *                               methods on one id would take each other's calls); use
     *                               {@link #replace} to change a method's handler on purpose
     */
    public RpcServer register(RpcMethod method, RpcHandler handler) {
        Registration added = new Registration(method, Objects.requireNonNull(handler, "handler"));
        Registration taken = methods.putIfAbsent(method.id(), added);
        if (taken != null) {
            throw new IllegalStateException("method id 0x" + Integer.toHexString(method.id()) + " is registered "
                    + "already (" + taken.handler().getClass().getName() + "); give the new method an id of its "
                    + "own, or call replace() to change its handler");
        }
        return this;
    }

    /** Serves {@code method} with {@code handler} in place of the handler registered for its id, if any. */
    public RpcServer replace(RpcMethod method, RpcHandler handler) {
        methods.put(method.id(), new Registration(method, Objects.requireNonNull(handler, "handler")));
        return this;
    }

    /** The handler registered for {@code methodId}, or null; for tests that call handlers directly. */
    RpcHandler handler(int methodId) {
        Registration registration = methods.get(methodId);
        return registration == null ? null : registration.handler();
    }

    /** Listens on a transport opened from {@code config}; returns the address clients connect to. */
    public String listen(TransportConfig config) {
        return listen(config, TransportOpener.DEFAULT);
    }

    /** Listens on a transport that {@code opener} opens (a decorator, for fault injection). */
    public String listen(TransportConfig config, TransportOpener opener) {
        if (closed) {
            throw new IllegalStateException("server closed");
        }
        Transport transport = opener.open(RpcClient.authenticated(config, secret), handler);
        transports.add(transport);
        return transport.localAddress();
    }

    /** The transports listened on, in the order of {@link #listen}. */
    public List<Transport> transports() {
        return List.copyOf(transports);
    }

    /** The random number this server drew at start; clients see it change when a server restarts. */
    public long epoch() {
        return epoch;
    }

    /** Peers the transports refused before any session: they could not prove the secret. */
    private long transportRefusals() {
        long n = 0;
        for (Transport t : transports) {
            n += t.counters().authenticationFailures();
        }
        return n;
    }

    /** Sends every handler run to {@code observer} (latency metrics); {@link RpcObserver#NONE} stops. */
    public void observe(RpcObserver observer) {
        this.observer = java.util.Objects.requireNonNull(observer, "observer");
    }

    /** The observer set with {@link #observe}, {@link RpcObserver#NONE} by default. */
    public RpcObserver observer() {
        return observer;
    }

    /** A snapshot of the counters. */
    public RpcServerCounters counters() {
        return new RpcServerCounters(requests.sum(), executions.sum(), replays.sum(), duplicatesWhileRunning.sum(),
                outcomesLost.sum(), handlerErrors.sum(), deadlinesMissed.sum(), sessions.refused() + transportRefusals(),
                sessions.welcomed(),
                dedupe.size());
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Transport transport : transports) {
            transport.close();
        }
        sweeper.shutdownNow();
        if (ownedExecutor != null) {
            ownedExecutor.shutdownNow();
        }
    }

    // ------------------------------------------------------------------------------------------
    // Inbound, on the progress thread

    private final class Handler implements MessageHandler {

        @Override
        public void onMessage(Peer from, InboundMessage message) {
            boolean[] flag = ON_PROGRESS_THREAD.get();
            flag[0] = true;
            try {
                dispatch(from, message);
            } finally {
                flag[0] = false;
            }
        }

        private void dispatch(Peer from, InboundMessage message) {
            MemorySegment frame = message.segment();
            if (!RpcDescriptor.valid(frame)) {
                LOG.log(System.Logger.Level.WARNING, "dropped a malformed RPC frame of " + frame.byteSize()
                        + " bytes from " + from.address());
                message.release();
                return;
            }
            byte type = RpcDescriptor.type(frame);
            try {
                switch (type) {
                    case RpcDescriptor.REQUEST -> {
                        onRequest(from, message);
                        return;
                    }
                    case RpcDescriptor.PING -> onPing(from, frame);
                    case RpcDescriptor.HELLO -> sessions.onHello(from, frame);
                    case RpcDescriptor.AUTH -> sessions.onAuth(from, frame);
                    case RpcDescriptor.CANCEL -> {
                        ServerCall call = running.get(new CallKey(RpcDescriptor.clientId(frame), RpcDescriptor.callId(frame)));
                        if (call != null) {
                            call.cancel();
                        }
                    }
                    default -> LOG.log(System.Logger.Level.WARNING, "unexpected " + RpcDescriptor.typeName(type)
                            + " from " + from.address());
                }
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "failed to handle " + RpcDescriptor.typeName(type) + " from "
                        + from.address(), e);
            }
            message.release();
        }

        @Override
        public void onPeerClosed(Peer peer, Throwable cause) {
            sessions.closed(peer);
        }
    }

    private void onPing(Peer from, MemorySegment frame) {
        if (!sessions.authenticated(from)) {
            return;
        }
        long clientId = RpcDescriptor.clientId(frame);
        dedupe.acknowledge(clientId, RpcDescriptor.ack(frame));
        sendControl(from, RpcDescriptor.PONG, clientId, 0, new byte[0]);
    }

    private void onRequest(Peer from, InboundMessage message) {
        requests.increment();
        MemorySegment frame = message.segment();
        int methodId = RpcDescriptor.method(frame);
        long clientId = RpcDescriptor.clientId(frame);
        long callId = RpcDescriptor.callId(frame);
        int stream = message.stream();
        if (!sessions.authenticated(from)) {
            message.release();
            sendError(from, stream, methodId, clientId, callId, RpcDescriptor.STATUS_NOT_AUTHENTICATED,
                    "NotAuthenticated", "peer " + from.address() + " has not authenticated", false);
            return;
        }
        Registration registration = methods.get(methodId);
        if (registration == null) {
            message.release();
            sendError(from, stream, methodId, clientId, callId, RpcDescriptor.STATUS_UNKNOWN_METHOD,
                    "UnknownMethod", "no handler for method " + methodId, false);
            return;
        }
        long arrived = System.nanoTime();
        long deadlineNanos = arrived + TimeUnit.MICROSECONDS.toNanos(RpcDescriptor.deadlineMicros(frame));
        long ack = RpcDescriptor.ack(frame);
        if (!registration.method().idempotent()) {
            DedupeTable.Admission admission = dedupe.admit(clientId, callId, ack, from);
            switch (admission.verdict()) {
                case RUN -> { }
                case RUNNING -> {
                    duplicatesWhileRunning.increment();
                    message.release();
                    return;
                }
                case DONE -> {
                    replays.increment();
                    message.release();
                    replay(from, stream, admission.entry().outcome, false);
                    return;
                }
                case LOST -> {
                    outcomesLost.increment();
                    message.release();
                    sendError(from, stream, methodId, clientId, callId, RpcDescriptor.STATUS_OUTCOME_LOST, "OutcomeLost",
                            "call " + callId + " of client " + Long.toHexString(clientId)
                                    + " was retried after the server dropped its outcome; it is not run again", false);
                    return;
                }
                default -> throw new IllegalStateException();
            }
        } else if (ack > 0) {
            dedupe.acknowledge(clientId, ack);
        }
        boolean inline = registration.method().nonBlocking();
        ServerCall call = new ServerCall(from, registration.method(), clientId, callId, deadlineNanos, message, inline);
        if (inline) {
            run(call, registration.handler(), stream, arrived); // starts now: one clock read per call
            return;
        }
        try {
            executor.execute(() -> run(call, registration.handler(), stream, System.nanoTime()));
        } catch (RejectedExecutionException e) {
            finish(call, stream, RpcDescriptor.STATUS_REMOTE_EXCEPTION, "Rejected", "server is shutting down");
            message.release();
        }
    }

    /**
     * Runs {@code call}'s handler, which starts at {@code now} (the caller's clock reading), and
     * sends its outcome; the request's buffer goes back after that (posting a receive costs a
     * call into the provider, which the client need not wait for).
     */
    private void run(ServerCall call, RpcHandler handler, int stream, long now) {
        CallKey key = call.inline() ? null : new CallKey(call.clientId(), call.callId());
        int status = 0;
        String errorClass = null;
        String errorMessage = null;
        long started = 0;
        try {
            if (now - call.deadlineNanos() > 0) {
                deadlinesMissed.increment();
                status = RpcDescriptor.STATUS_DEADLINE_EXCEEDED;
                errorClass = "DeadlineExceeded";
                errorMessage = "the deadline passed before the handler started";
            } else {
                if (key != null) {
                    running.put(key, call);
                }
                executions.increment();
                started = now;
                handler.handle(call);
                handled(call, started, true);
            }
        } catch (Throwable t) {
            if (started != 0) {
                handled(call, started, false);
            }
            handlerErrors.increment();
            status = RpcDescriptor.STATUS_REMOTE_EXCEPTION;
            errorClass = t.getClass().getName();
            errorMessage = t.getMessage();
            if (t instanceof Error && !(t instanceof AssertionError)) {
                LOG.log(System.Logger.Level.ERROR, "handler of method " + call.method() + " threw", t);
            }
        } finally {
            if (key != null) {
                running.remove(key);
            }
        }
        try {
            finish(call, stream, status, errorClass, errorMessage);
        } finally {
            call.requestMessage().release();
        }
    }

    private void handled(ServerCall call, long started, boolean ok) {
        long nanos = System.nanoTime() - started;
        observer.handled(call.rpcMethod(), nanos, ok);
        dev.ferry.rpc.events.RpcEvents.handled(call.method(), call.callId(), nanos, ok);
    }

    /** Sends the outcome of a call, storing it first for a non-idempotent method. */
    private void finish(ServerCall call, int stream, int status, String errorClass, String errorMessage) {
        Peer from = call.from();
        boolean atMostOnce = !call.rpcMethod().idempotent();
        if (status != 0) {
            call.discardReply();
            byte[] body = errorBody(errorClass, errorMessage);
            byte[] frame = new byte[RpcDescriptor.HEADER + body.length];
            MemorySegment f = MemorySegment.ofArray(frame);
            RpcDescriptor.write(f, RpcDescriptor.ERROR, (byte) 0, call.method(), call.clientId(), call.callId(), status, epoch);
            MemorySegment.copy(body, 0, f, java.lang.foreign.ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
            Peer target = from;
            if (atMostOnce) {
                Object latest = dedupe.complete(call.clientId(), call.callId(), frame);
                target = latest instanceof Peer p ? p : from;
            }
            replay(target, stream, frame, call.inline());
            return;
        }
        if (!call.hasReply()) {
            call.reply(0);
        }
        OutboundMessage out = call.reply;
        MemorySegment segment = out != null ? out.segment() : call.heapReply;
        RpcDescriptor.write(segment, RpcDescriptor.RESPONSE, (byte) 0, call.method(), call.clientId(), call.callId(), 0, epoch);
        Peer target = from;
        if (atMostOnce) {
            byte[] stored = segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            Object latest = dedupe.complete(call.clientId(), call.callId(), stored);
            target = latest instanceof Peer p ? p : from;
        }
        if (out != null && target == from) {
            from.sendAndForget(stream, out);
            return;
        }
        // The reply went to the heap (an inline handler with an empty send pool), or a retry came
        // in on another peer meanwhile: copy it into a buffer of the peer that waits.
        byte[] bytes = segment.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
        call.discardReply();
        replay(target, stream, bytes, call.inline());
    }

    private static byte[] errorBody(String errorClass, String errorMessage) {
        return (errorClass + "\n" + (errorMessage == null ? "" : errorMessage)).getBytes(StandardCharsets.UTF_8);
    }

    /** Sends a stored frame; on the progress thread only if a buffer is free now, else via the executor. */
    private void replay(Peer to, int stream, byte[] frame, boolean onProgressThread) {
        boolean mayNotWait = onProgressThread || isProgressThread();
        OutboundMessage out;
        try {
            out = mayNotWait ? to.tryAllocate(frame.length) : to.allocate(frame.length);
        } catch (RuntimeException e) {
            // The peer failed: the client resends on its next link and gets the stored outcome then.
            LOG.log(System.Logger.Level.DEBUG, "could not answer " + to.address() + ": " + e.getMessage());
            return;
        }
        if (out == null) {
            offload(() -> replay(to, stream, frame, false));
            return;
        }
        MemorySegment.copy(frame, 0, out.segment(), java.lang.foreign.ValueLayout.JAVA_BYTE, 0, frame.length);
        if (RpcDescriptor.type(out.segment()) == RpcDescriptor.RESPONSE) {
            RpcDescriptor.flags(out.segment(), (byte) (RpcDescriptor.flags(out.segment()) | RpcDescriptor.FLAG_REPLAYED));
        }
        to.sendAndForget(stream, out);
    }

    private void sendError(Peer to, int stream, int method, long clientId, long callId, int status, String errorClass,
            String errorMessage, boolean mayBlock) {
        byte[] body = errorBody(errorClass, errorMessage);
        byte[] frame = new byte[RpcDescriptor.HEADER + body.length];
        MemorySegment f = MemorySegment.ofArray(frame);
        RpcDescriptor.write(f, RpcDescriptor.ERROR, (byte) 0, method, clientId, callId, status, epoch);
        MemorySegment.copy(body, 0, f, java.lang.foreign.ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
        replay(to, stream, frame, !mayBlock);
    }

    private void sendControl(Peer to, byte type, long clientId, long callId, byte[] body) {
        byte[] frame = new byte[RpcDescriptor.HEADER + body.length];
        MemorySegment f = MemorySegment.ofArray(frame);
        RpcDescriptor.write(f, type, (byte) 0, 0, clientId, callId, 0, epoch);
        MemorySegment.copy(body, 0, f, java.lang.foreign.ValueLayout.JAVA_BYTE, RpcDescriptor.HEADER, body.length);
        replay(to, RpcClient.CONTROL_STREAM, frame, true);
    }

    private void offload(Runnable task) {
        try {
            executor.execute(task);
        } catch (RejectedExecutionException e) {
            // shutting down
        }
    }

    /** True inside {@link Handler#onMessage}: a transport thread that must never wait for a send buffer. */
    private static boolean isProgressThread() {
        return ON_PROGRESS_THREAD.get()[0];
    }
}
