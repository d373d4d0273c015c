package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.CQ_ERR_ENTRY;
import static dev.ferry.fabric.InfoDescriptor.CQ_READ;
import static dev.ferry.fabric.InfoDescriptor.CQ_READERR;
import static dev.ferry.fabric.InfoDescriptor.CQ_SIGNAL;
import static dev.ferry.fabric.InfoDescriptor.CQ_SREAD;
import static dev.ferry.fabric.InfoDescriptor.CQ_SREADFROM;
import static dev.ferry.fabric.InfoDescriptor.CQ_STRERROR;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A completion queue ({@code fid_cq}). One thread polls it: {@link #read} drains completions
 * in batches; an error entry is announced by {@link #ERROR_AVAILABLE} and taken with
 * {@link #readError}. Some providers make progress only while their queues are read, so the
 * owner must keep polling, also while peers do RMA against this process.
 */
public final class CompletionQueue extends FabricObject {

    /** What {@link #read} returns when an error entry waits. */
    public static final int ERROR_AVAILABLE = -1;

    private final MemorySegment readFn;
    private final MemorySegment readFromFn;
    private final MemorySegment sreadFn;
    private final MemorySegment sreadFromFn;
    private final MemorySegment signalFn;
    private final boolean waitable;

    CompletionQueue(long fid, Domain domain, boolean waitable) {
        super(fid, domain);
        long ops = LibFabric.word(fid, OBJ_OPS);
        this.readFn = LibFabric.function(ops, CQ_READ);
        this.readFromFn = LibFabric.function(ops, InfoDescriptor.CQ_READFROM);
        this.sreadFn = waitable ? LibFabric.function(ops, CQ_SREAD) : null;
        this.sreadFromFn = waitable ? LibFabric.function(ops, CQ_SREADFROM) : null;
        this.signalFn = waitable ? LibFabric.function(ops, CQ_SIGNAL) : null;
        this.waitable = waitable;
    }

    /**
     * Reads up to {@code batch.capacity()} completions without blocking.
     *
     * @return the number read (0 when none), or {@link #ERROR_AVAILABLE}
     */
    public int read(CompletionBatch batch) {
        long rc;
        try {
            rc = (long) LibFabric.L_JJJ.invokeExact(readFn, fid, batch.entries.address(), (long) batch.capacity);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        return result(rc, "fi_cq_read");
    }

    /**
     * Like {@link #read}, also recording each sender's address handle ({@link CompletionBatch#source});
     * meaningful for receives on reliable-datagram endpoints opened with {@code FI_SOURCE}.
     */
    public int readFrom(CompletionBatch batch) {
        long rc;
        try {
            rc = (long) LibFabric.L_JJJJ.invokeExact(readFromFn, fid, batch.entries.address(), (long) batch.capacity,
                    batch.sources.address());
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        return result(rc, "fi_cq_readfrom");
    }

    /**
     * Waits up to {@code timeoutMillis} for completions; only on a queue opened waitable.
     *
     * @return as {@link #read}; 0 when the time passed with none
     */
    public int await(CompletionBatch batch, int timeoutMillis) {
        if (!waitable) {
            throw new IllegalStateException("completion queue was opened without a wait object");
        }
        long rc;
        try {
            rc = (long) LibFabric.L_JJJJI.invokeExact(sreadFn, fid, batch.entries.address(), (long) batch.capacity,
                    0L, timeoutMillis);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        return awaitResult(rc, "fi_cq_sread");
    }

    /** Like {@link #await}, also recording each sender's address handle, as {@link #readFrom} does. */
    public int awaitFrom(CompletionBatch batch, int timeoutMillis) {
        if (!waitable) {
            throw new IllegalStateException("completion queue was opened without a wait object");
        }
        long rc;
        try {
            rc = (long) LibFabric.L_JJJJJI.invokeExact(sreadFromFn, fid, batch.entries.address(),
                    (long) batch.capacity, batch.sources.address(), 0L, timeoutMillis);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        return awaitResult(rc, "fi_cq_sreadfrom");
    }

    /** True if the queue was opened with a wait object, so {@link #await} may block. */
    public boolean waitable() {
        return waitable;
    }

    /**
     * Wakes a thread blocked in {@link #await} ({@code fi_cq_signal}); safe from any thread.
     * Does nothing on a queue without a wait object.
     */
    public void signal() {
        if (!waitable) {
            return;
        }
        int rc;
        try {
            rc = (int) LibFabric.I_J.invokeExact(signalFn, fid);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        LibFabric.check(rc, "fi_cq_signal");
    }

    /**
     * A wait cut short by a signal to the thread (profilers and the JVM send them), by
     * {@link #signal} or by its timeout is a wait that ended with nothing: the caller polls again.
     */
    private static int awaitResult(long rc, String what) {
        // Some providers end a signalled or timed-out wait with ECANCELED or ETIMEDOUT.
        return rc == -Errno.EINTR || rc == -Errno.ECANCELED || rc == -Errno.ETIMEDOUT ? 0 : result(rc, what);
    }

    private static int result(long rc, String what) {
        if (rc >= 0) {
            return (int) rc;
        }
        if (rc == -Errno.EAGAIN) {
            return 0;
        }
        if (rc == -Errno.FI_EAVAIL) {
            return ERROR_AVAILABLE;
        }
        throw FabricException.of((int) -rc, what);
    }

    /** Takes the waiting error entry, or returns null if there is none. */
    public CompletionError readError() {
        long ops = LibFabric.word(fid, OBJ_OPS);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment e = arena.allocate(CQ_ERR_ENTRY);
            long rc = (long) LibFabric.L_JJJ.invokeExact(LibFabric.function(ops, CQ_READERR), fid, e.address(), 0L);
            if (rc == -Errno.EAGAIN) {
                return null;
            }
            LibFabric.check(rc, "fi_cq_readerr");
            int errno = e.get(JAVA_INT, offset(CQ_ERR_ENTRY, "err"));
            int provErrno = e.get(JAVA_INT, offset(CQ_ERR_ENTRY, "prov_errno"));
            long errData = e.get(JAVA_LONG, offset(CQ_ERR_ENTRY, "err_data"));
            String text = LibFabric.strerror(errno);
            long strerror = LibFabric.word(ops, CQ_STRERROR);
            if (strerror != 0) {
                MemorySegment buf = arena.allocate(256);
                long s = (long) LibFabric.J_JIJJJ.invokeExact(MemorySegment.ofAddress(strerror), fid, provErrno,
                        errData, buf.address(), 256L);
                String prov = LibFabric.string(s);
                if (prov != null && !prov.isBlank() && !prov.equals(text)) {
                    text = text + "; provider: " + prov;
                }
            }
            return new CompletionError(e.get(JAVA_LONG, offset(CQ_ERR_ENTRY, "op_context")),
                    e.get(JAVA_LONG, offset(CQ_ERR_ENTRY, "flags")), errno, provErrno, text);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
