package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import static dev.ferry.fabric.InfoDescriptor.EQ_CM_ENTRY;
import static dev.ferry.fabric.InfoDescriptor.EQ_ERR_ENTRY;
import static dev.ferry.fabric.InfoDescriptor.EQ_READ;
import static dev.ferry.fabric.InfoDescriptor.EQ_READERR;
import static dev.ferry.fabric.InfoDescriptor.EQ_SREAD;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * An event queue ({@code fid_eq}) for connection management events. Its read buffers are its
 * own, allocated once: a progress thread polls it on every timer turn, and a poll must not
 * allocate. Reads are serialized, and a close waits for the read in progress (a bounded wait
 * ends within its timeout) before the native queue and the buffers go.
 */
public final class EventQueue extends FabricObject {

    private static final int FI_CONNREQ = 1;
    private static final int FI_CONNECTED = 2;
    private static final int FI_SHUTDOWN = 3;
    private static final long ENTRY_BYTES = 256;

    private final MemorySegment readFn;
    private final MemorySegment sreadFn;
    private final MemorySegment readErrFn;
    /** The event's type, its entry and an error entry: written by the provider inside a read. */
    private final Arena arena = Arena.ofShared();
    private final MemorySegment event = arena.allocate(JAVA_INT);
    private final MemorySegment entry = arena.allocate(ENTRY_BYTES, 8);
    private final MemorySegment errorEntry = arena.allocate(EQ_ERR_ENTRY);
    /** Held by a read, and from just before the native close until the buffers are freed. */
    private final ReentrantLock reading = new ReentrantLock();

    EventQueue(long fid, Fabric fabric) {
        super(fid, fabric);
        long ops = LibFabric.word(fid, OBJ_OPS);
        this.readFn = LibFabric.function(ops, EQ_READ);
        this.sreadFn = LibFabric.function(ops, EQ_SREAD);
        this.readErrFn = LibFabric.function(ops, EQ_READERR);
    }

    /** The next event, or null if none waits. */
    public ConnectionEvent poll() {
        return read(-1);
    }

    /** The next event, waiting up to {@code timeoutMillis}; null if none came. */
    public ConnectionEvent await(int timeoutMillis) {
        return read(Math.max(0, timeoutMillis));
    }

    private ConnectionEvent read(int timeoutMillis) {
        reading.lock();
        try {
            ensureOpen();
            // tcp's connection manager runs inside this read and trusts errno: see ListenerSocket.
            ListenerSocket.clearErrno();
            long rc = timeoutMillis < 0
                    ? (long) LibFabric.L_JJJJJ.invokeExact(readFn, fid, event.address(), entry.address(), ENTRY_BYTES, 0L)
                    : (long) LibFabric.L_JJJJIJ.invokeExact(sreadFn, fid, event.address(), entry.address(), ENTRY_BYTES,
                            timeoutMillis, 0L);
            if (rc == -Errno.EAGAIN || rc == -110 /* ETIMEDOUT */) {
                return null;
            }
            if (rc == -Errno.FI_EAVAIL) {
                return readError();
            }
            LibFabric.check(rc, "fi_eq_read");
            long fidOfEvent = entry.get(JAVA_LONG, offset(EQ_CM_ENTRY, "fid"));
            return switch (event.get(JAVA_INT, 0)) {
                case FI_CONNREQ -> new ConnectionEvent(ConnectionEvent.Type.CONNREQ, fidOfEvent,
                        entry.get(JAVA_LONG, offset(EQ_CM_ENTRY, "info")), 0, null,
                        entry.asSlice(EQ_CM_ENTRY.byteSize(), Math.max(0, rc - EQ_CM_ENTRY.byteSize()))
                                .toArray(java.lang.foreign.ValueLayout.JAVA_BYTE));
                case FI_CONNECTED -> new ConnectionEvent(ConnectionEvent.Type.CONNECTED, fidOfEvent, 0, 0, null);
                case FI_SHUTDOWN -> new ConnectionEvent(ConnectionEvent.Type.SHUTDOWN, fidOfEvent, 0, 0, null);
                default -> new ConnectionEvent(ConnectionEvent.Type.OTHER, fidOfEvent, 0, 0, null);
            };
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        } finally {
            reading.unlock();
        }
    }

    @Override
    void beforeClose() {
        reading.lock(); // a read in progress ends before the native queue goes
    }

    @Override
    void afterClose() {
        try {
            arena.close();
        } finally {
            if (reading.isHeldByCurrentThread()) {
                reading.unlock();
            }
        }
    }

    private ConnectionEvent readError() throws Throwable {
        MemorySegment e = errorEntry;
        // err_data and err_data_size are read as well as written: the provider frees the error
        // data it handed out at the last read and copies into a buffer the caller names. Zeroed,
        // they name none, and it hands out its own again.
        e.fill((byte) 0);
        long rc = (long) LibFabric.L_JJJ.invokeExact(readErrFn, fid, e.address(), 0L);
        LibFabric.check(rc, "fi_eq_readerr");
        int errno = e.get(JAVA_INT, offset(EQ_ERR_ENTRY, "err"));
        return new ConnectionEvent(ConnectionEvent.Type.ERROR, e.get(JAVA_LONG, offset(EQ_ERR_ENTRY, "fid")), 0,
                errno, LibFabric.strerror(errno) + " (provider errno " + e.get(JAVA_INT, offset(EQ_ERR_ENTRY,
                        "prov_errno")) + ")");
    }
}
