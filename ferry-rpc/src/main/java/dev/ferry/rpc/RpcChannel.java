package dev.ferry.rpc;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import dev.ferry.transport.InboundMessage;
import dev.ferry.transport.OutboundMessage;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportException;
import dev.ferry.transport.TransportException.Reason;

/**
 * Calls to one server, over whichever session is current: on the primary transport normally,
 * on the fallback while the circuit breaker is open. Thread-safe.
 *
 * <p>Every call stays in the pending table, keyed by its call id, until a response, an error,
 * its deadline or a cancel removes it; whoever removes it completes it, so each call
 * completes exactly once. When a session fails, its calls stay pending and go out again on
 * the next session with the same call id (the server's deduplication table keeps a
 * non-idempotent call from running twice). A non-idempotent call already sent to a server that
 * has since restarted (a new epoch: its table is gone) fails with
 * {@link PeerUnavailableException} instead, since it may have run.
 *
 * <p>The parts: this class sends calls and completes them; {@link PendingCalls} is the table;
 * {@link CallTimeouts} sweeps the deadlines on the client's timer thread (no task per call);
 * {@link ChannelSessions} keeps the sessions (connect, heartbeat, failure, fallback) and
 * {@link ClientHandshake} opens one.
 */
public final class RpcChannel {

    /**
     * A blocking call first waits this long for its reply by polling the transport itself
     * ({@link Transport#awaitPolling}), so that a fast reply costs no thread wake-up; past it, or
     * while this channel's replies take longer than that, it parks. 50 us: several round trips
     * of a small call on shm, a tenth of a parameter-server fetch.
     */
    static final long SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(Long.getLong("ferry.rpc.spinMicros", 50));

    private final RpcClient client;
    private final String primaryAddress;
    private final String fallbackAddress;
    final CircuitBreaker breaker;
    private final PendingCalls pending;
    private final ChannelSessions sessions;
    private volatile long ackWatermark;
    /** Moving average (1/8) of this channel's successful round trips: whether spinning for a reply pays. */
    private volatile long typicalNanos;

    RpcChannel(RpcClient client, String primaryAddress, String fallbackAddress) {
        this.client = client;
        this.primaryAddress = primaryAddress;
        this.fallbackAddress = fallbackAddress;
        this.pending = new PendingCalls(client.nextCallId);
        RpcConfig c = client.config;
        this.breaker = new CircuitBreaker(primaryAddress, c.breakerFailures(), TimeUnit.MILLISECONDS.toNanos(c.breakerWindowMillis()),
                TimeUnit.MILLISECONDS.toNanos(c.breakerProbeMillis()));
        this.sessions = new ChannelSessions(this, client, primaryAddress, fallbackAddress, breaker);
    }

    /** The acknowledgement watermark sent with every frame: the lowest call id still pending. */
    long ackWatermark() {
        return ackWatermark;
    }

    /** The server's address on the primary transport. */
    public String address() {
        return primaryAddress;
    }

    /** True while a session to the server is up. */
    public boolean isConnected() {
        Session s = sessions.current();
        return s != null && s.live();
    }

    /**
     * Waits until a session to the server is up, for at most {@code timeoutMillis}; true if it is.
     * Calls need not wait for it (they queue until a session is up, within their deadline);
     * this is for start-up checks and tests.
     */
    public boolean awaitConnected(long timeoutMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (!isConnected()) {
            if (System.nanoTime() - deadline > 0) {
                return false;
            }
            Thread.sleep(1);
        }
        return true;
    }

    /** True while the server's traffic goes over the fallback transport. */
    public boolean onFallback() {
        Session s = sessions.current();
        return s != null && s.fallback;
    }

    /** Why the last session or connect attempt failed, or null. */
    public Throwable lastFailure() {
        return sessions.lastFailure();
    }

    /** Calls not yet completed. */
    public int pendingCalls() {
        return pending.size();
    }

    // ------------------------------------------------------------------------------------------
    // Calls

    /** {@link #call(RpcMethod, int, RequestWriter, long)} with the default deadline. */
    public CompletableFuture<RpcResponse> call(RpcMethod method, int length, RequestWriter writer) {
        return call(method, length, writer, client.config.defaultDeadlineMillis());
    }

    /**
     * Calls {@code method} with a request body of {@code length} bytes that {@code writer}
     * encodes straight into the transport's send buffer (again on each resend).
     *
     * <p>The future completes with the response (release it), or fails with an
     * {@link RpcException}: {@link RpcTimeoutException}, {@link PeerUnavailableException},
     * {@link RemoteException} or {@link AuthenticationException}. Cancelling it abandons the call
     * and tells the server (best effort); a non-idempotent call that was sent may still run.
     */
    public CompletableFuture<RpcResponse> call(RpcMethod method, int length, RequestWriter writer, long deadlineMillis) {
        return call(method, length, writer, deadlineMillis, null);
    }

    /**
     * {@link #call(RpcMethod, int, RequestWriter)} as one of the calls of {@code group}, which its
     * owner (the calling thread) then {@linkplain CallGroup#await awaits} with the others.
     *
     * @throws IllegalStateException if the calling thread does not own {@code group}
     */
    public CompletableFuture<RpcResponse> call(RpcMethod method, int length, RequestWriter writer, CallGroup group) {
        return call(method, length, writer, client.config.defaultDeadlineMillis(),
                Objects.requireNonNull(group, "group"));
    }

    private CompletableFuture<RpcResponse> call(RpcMethod method, int length, RequestWriter writer, long deadlineMillis,
            CallGroup group) {
        if (client.isClosed()) {
            CompletableFuture<RpcResponse> failed = new CompletableFuture<>();
            failed.completeExceptionally(new RpcException("client closed"));
            return failed;
        }
        if (length < 0 || length > client.maxBody) {
            throw new IllegalArgumentException("request body of " + length + " bytes is outside 0.." + client.maxBody);
        }
        if (deadlineMillis <= 0) {
            throw new IllegalArgumentException("deadline must be positive: " + deadlineMillis);
        }
        if (group != null) {
            group.started();
        }
        Call call = pending.open(this, method, length, writer, deadlineMillis, group);
        client.calls.increment();
        client.deadlines.watch(call.deadlineNanos);
        Session s = sessions.current();
        if (s != null && s.live()) {
            send(call, s, true);
        }
        return call.future;
    }

    /** Calls with a copy of {@code request} as the body: convenient, one copy. */
    public CompletableFuture<RpcResponse> call(RpcMethod method, byte[] request) {
        return call(method, request.length, body -> MemorySegment.copy(request, 0, body, ValueLayout.JAVA_BYTE, 0,
                request.length));
    }

    /** The blocking form of {@link #call(RpcMethod, int, RequestWriter)}. */
    public RpcResponse invoke(RpcMethod method, int length, RequestWriter writer) {
        return invoke(method, length, writer, client.config.defaultDeadlineMillis());
    }

    /** The blocking form of {@link #call(RpcMethod, int, RequestWriter, long)}; throws its {@link RpcException}. */
    public RpcResponse invoke(RpcMethod method, int length, RequestWriter writer, long deadlineMillis) {
        CompletableFuture<RpcResponse> future = call(method, length, writer, deadlineMillis);
        if (!future.isDone() && typicalNanos < SPIN_NANOS) {
            Session s = sessions.current();
            if (s != null) {
                (s.fallback ? client.fallback : client.primary).awaitPolling(future, SPIN_NANOS);
            }
        }
        try {
            // The call's own deadline completes it; the margin only guards against a lost timer.
            return future.get(deadlineMillis + 10_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof RpcException r ? r : new RpcException(e.getCause().toString(), e.getCause());
        } catch (InterruptedException e) {
            future.cancel(false);
            Thread.currentThread().interrupt();
            throw new RpcException("interrupted while calling method " + method.id() + " on " + primaryAddress, e);
        } catch (TimeoutException e) {
            future.cancel(false);
            throw new RpcTimeoutException(method.id(), primaryAddress, deadlineMillis, "the deadline timer never fired");
        } catch (CancellationException e) {
            throw new RpcException("call of method " + method.id() + " to " + primaryAddress + " was cancelled", e);
        }
    }

    /** Sends {@code call} on {@code s} unless it is already in flight on a live session. */
    void send(Call call, Session s) {
        send(call, s, false);
    }

    /**
     * {@link #send(Call, Session)}; {@code justOpened} when the call was opened a moment ago, so
     * that, unless the send waits for a buffer, its whole deadline is left without reading the clock.
     */
    private void send(Call call, Session s, boolean justOpened) {
        Session prev;
        do {
            prev = call.sentOn();
            if (prev == s || prev != null && !prev.dead()) {
                return;
            }
        } while (!call.sentOn(prev, s));
        if (call.future.isDone()) {
            return;
        }
        if (!call.method.idempotent() && call.firstEpoch != 0 && call.firstEpoch != s.epoch) {
            fail(call, new PeerUnavailableException(peerName(s), "the server restarted while non-idempotent call "
                    + call.id + " of method " + call.method.id() + " was in flight; it ran at most once and is not"
                    + " sent again", null), false);
            return;
        }
        OutboundMessage message = null;
        while (message == null) {
            try {
                message = s.peer.allocate(RpcDescriptor.HEADER + call.length);
            } catch (RuntimeException e) {
                justOpened = false;
                switch (TransportException.reasonOf(e, Reason.UNSPECIFIED)) {
                    case POOL_EXHAUSTED -> { } // back-pressure: the caller waits for it, within its deadline
                    case BAD_INPUT, LIMIT_REACHED, INTERRUPTED -> {
                        // No other session would take this request either: the call fails, the session stays.
                        fail(call, new RpcException("call " + call.id + " of method " + call.method.id()
                                + " cannot be sent to " + peerName(s) + ": " + e.getMessage(), e), false);
                        return;
                    }
                    case UNSPECIFIED -> {
                        // Not the transport's own failure: the peer's state says what it was.
                        if (!s.peer.isOpen()) {
                            sessionFailed(s, e);
                            return;
                        }
                    }
                    default -> {
                        sessionFailed(s, e); // the peer failed or closed: a new session retries the call
                        return;
                    }
                }
                if (call.future.isDone() || System.nanoTime() - call.deadlineNanos > 0) {
                    fail(call, new RpcTimeoutException(call.method.id(), peerName(s), call.deadlineMillis,
                            "no send buffer before the deadline: " + e.getMessage()), false);
                    return;
                }
            }
        }
        boolean retry = prev != null;
        MemorySegment frame = message.segment();
        long leftMicros = justOpened && !retry ? TimeUnit.MILLISECONDS.toMicros(call.deadlineMillis)
                : Math.max(1, TimeUnit.NANOSECONDS.toMicros(call.deadlineNanos - System.nanoTime()));
        byte flags = (byte) ((call.method.idempotent() ? RpcDescriptor.FLAG_IDEMPOTENT : 0)
                | (retry ? RpcDescriptor.FLAG_RETRY : 0));
        RpcDescriptor.write(frame, RpcDescriptor.REQUEST, flags, call.method.id(), client.clientId, call.id, leftMicros,
                ackWatermark);
        try {
            call.writer.write(RpcDescriptor.body(frame));
        } catch (Throwable t) {
            message.release();
            fail(call, new RpcException("the request writer of method " + call.method.id() + " threw: " + t, t), false);
            return;
        }
        if (call.firstEpoch == 0) {
            call.firstEpoch = s.epoch;
        }
        if (retry) {
            client.resends.increment();
        }
        if (s.fallback) {
            client.fallbackSends.increment();
        }
        // A failed send fails the session (and the call goes out again on the next one): not
        // every transport fails the peer when one of its links fails, so the send's own outcome
        // is watched, with the session's one handler (no lambda per call). Nobody waits for the
        // send itself (the caller waits for the reply): the transport need not wake to reap it.
        s.peer.sendWatched(RpcClient.CONTROL_STREAM + 1 + (int) Math.floorMod(call.id, (long) RpcClient.CALL_STREAMS),
                message, s.onSendDone);
    }

    /** Completes {@code call} exceptionally if it is still pending. */
    private void fail(Call call, RpcException cause, boolean countAsTimeout) {
        if (!pending.remove(call)) {
            return;
        }
        completed(call, false);
        if (cause instanceof RpcTimeoutException || countAsTimeout) {
            client.timeouts.increment();
        } else if (cause instanceof PeerUnavailableException) {
            client.unavailable.increment();
        } else if (cause instanceof RemoteException) {
            client.remoteErrors.increment();
        }
        call.future.completeExceptionally(cause);
    }

    /** Tells the observer and, past the slow-call threshold, the flight recorder. */
    private void completed(Call call, boolean ok) {
        completed(call, ok, System.nanoTime());
    }

    /** {@link #completed(Call, boolean)} at {@code now}, a clock reading the caller took. */
    private void completed(Call call, boolean ok, long now) {
        long nanos = now - call.startNanos;
        if (ok) {
            // Samples count up to twice the spin at most: one stall of the host must not stop the
            // spinning for hundreds of calls. A lost update among racing callers does no harm.
            long typical = typicalNanos;
            typicalNanos = typical + ((Math.min(nanos, 2 * SPIN_NANOS) - typical) >> 3);
        }
        client.observer.callCompleted(call.method, nanos, ok);
        dev.ferry.rpc.events.RpcEvents.callCompleted(call.method.id(), primaryAddress, call.id, nanos, ok);
    }

    /**
     * Expires the calls past their deadline at {@code nowNanos}; returns the earliest deadline of
     * the others, or {@code nowNanos + horizonNanos} if that is earlier. On the timer thread.
     */
    long expireDue(long nowNanos, long horizonNanos) {
        return pending.sweep(this, nowNanos, horizonNanos);
    }

    /** Fails {@code call} for its deadline, saying why it had no answer. */
    void expire(Call call) {
        Session s = sessions.current();
        Throwable cause = sessions.lastFailure();
        if (s == null || !s.live()) {
            fail(call, new PeerUnavailableException(primaryAddress + (fallbackAddress == null ? "" : " (fallback "
                    + fallbackAddress + ")"), "no session within the deadline of " + call.deadlineMillis
                    + " ms of call " + call.id + " of method " + call.method.id(), cause), false);
        } else {
            Session sent = call.sentOn();
            fail(call, new RpcTimeoutException(call.method.id(), peerName(s), call.deadlineMillis,
                    sent == null ? "never sent" : sent.dead() ? "sent on a session that failed" : "no answer"), false);
        }
    }

    void cancelled(Call call) {
        if (!pending.remove(call)) {
            return;
        }
        completed(call, false);
        client.cancelled.increment();
        Session s = call.sentOn();
        if (s != null && s.live()) {
            try {
                OutboundMessage message = s.peer.tryAllocate(RpcDescriptor.HEADER);
                if (message != null) {
                    RpcDescriptor.write(message.segment(), RpcDescriptor.CANCEL, (byte) 0, call.method.id(),
                            client.clientId, call.id, 0, ackWatermark);
                    s.peer.sendAndForget(RpcClient.CONTROL_STREAM, message);
                }
            } catch (RuntimeException e) {
                // best effort: the session is failing anyway
            }
        }
    }

    void failAll(RpcException cause) {
        for (Call call : pending.snapshot()) {
            fail(call, cause, false);
        }
    }

    static String peerName(Session s) {
        return s.peer.address() + (s.fallback ? " (fallback)" : "");
    }

    // ------------------------------------------------------------------------------------------
    // Inbound, on a transport's progress thread

    void onFrame(Session s, InboundMessage message) {
        MemorySegment frame = message.segment();
        if (!RpcDescriptor.valid(frame)) {
            message.release();
            return;
        }
        long now = System.nanoTime();
        s.lastHeardNanos = now;
        byte type = RpcDescriptor.type(frame);
        if ((type == RpcDescriptor.CHALLENGE || type == RpcDescriptor.WELCOME || type == RpcDescriptor.REFUSED)
                && RpcDescriptor.callId(frame) != s.handshake) {
            message.release(); // from a handshake on this peer that was given up
            return;
        }
        switch (type) {
            case RpcDescriptor.RESPONSE -> {
                Call call = pending.remove(RpcDescriptor.callId(frame));
                if (call == null) {
                    message.release();
                    return;
                }
                RpcResponse response = new RpcResponse(message);
                completed(call, true, now);
                client.succeeded.increment(); // before completing, so a caller that returns sees it
                if (!call.future.complete(response)) {
                    client.succeeded.decrement();
                    response.release();
                }
            }
            case RpcDescriptor.ERROR -> {
                int status = RpcDescriptor.status(frame);
                long callId = RpcDescriptor.callId(frame);
                String text = new String(RpcDescriptor.body(frame).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
                message.release();
                if (status == RpcDescriptor.STATUS_NOT_AUTHENTICATED) {
                    // The server forgot this session (it saw the peer fail): open a new one and resend.
                    sessionFailed(s, new RpcException("server " + s.peer.address() + " no longer knows this session"));
                    return;
                }
                Call call = pending.get(callId);
                if (call == null) {
                    return;
                }
                int newline = text.indexOf('\n');
                String remoteClass = newline < 0 ? text : text.substring(0, newline);
                String remoteMessage = newline < 0 ? "" : text.substring(newline + 1);
                RpcException cause = status == RpcDescriptor.STATUS_DEADLINE_EXCEEDED
                        ? new RpcTimeoutException(call.method.id(), peerName(s), call.deadlineMillis,
                                "the server saw the deadline pass before it ran the handler")
                        : new RemoteException(call.method.id(), peerName(s), status, remoteClass, remoteMessage);
                fail(call, cause, false);
            }
            case RpcDescriptor.CHALLENGE -> {
                long epoch = RpcDescriptor.epoch(frame);
                byte[] body = RpcDescriptor.body(frame).toArray(ValueLayout.JAVA_BYTE);
                message.release();
                s.epoch = epoch;
                s.challenge.complete(body);
            }
            case RpcDescriptor.WELCOME -> {
                long epoch = RpcDescriptor.epoch(frame);
                message.release();
                s.welcome.complete(epoch);
            }
            case RpcDescriptor.REFUSED -> {
                String reason = new String(RpcDescriptor.body(frame).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
                message.release();
                s.welcome.completeExceptionally(new AuthenticationException("server " + s.peer.address()
                        + " refused client " + Long.toHexString(client.clientId) + ": " + reason));
            }
            default -> message.release(); // PONG: hearing it was the point
        }
    }

    // ------------------------------------------------------------------------------------------
    // Upkeep, on the timer thread; sessions are kept by ChannelSessions

    /** Periodic (and on demand) upkeep: the watermark, heartbeats, reconnects; on the timer thread. */
    void maintain(long now) {
        if (client.isClosed()) {
            return;
        }
        ackWatermark = pending.watermark();
        sessions.maintain(now);
    }

    /** After this process stalled, the silence of the server is not its fault. */
    void forgiveSilence(long now) {
        sessions.forgiveSilence(now);
    }

    /** A session failed: its calls wait for the next session, which is opened at once. */
    void sessionFailed(Session s, Throwable cause) {
        sessions.sessionFailed(s, cause);
    }

    /** Sends every pending call that is not in flight on {@code s}, just ready. */
    void resendAll(Session s) {
        for (Call call : pending.snapshot()) {
            if (!s.live()) {
                return;
            }
            send(call, s);
        }
    }
}
