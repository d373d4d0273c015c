package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

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
 * allocate. One reader at a time (reads are serialized on the queue).
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

    private synchronized ConnectionEvent read(int timeoutMillis) {
        ensureOpen();
        try {
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
        }
    }

    @Override
    void afterClose() {
        synchronized (this) { // a read that started before the close ends before its buffers go
            arena.close();
        }
    }

    private ConnectionEvent readError() throws Throwable {
        MemorySegment e = errorEntry;
        long rc = (long) LibFabric.L_JJJ.invokeExact(readErrFn, fid, e.address(), 0L);
        LibFabric.check(rc, "fi_eq_readerr");
        int errno = e.get(JAVA_INT, offset(EQ_ERR_ENTRY, "err"));
        return new ConnectionEvent(ConnectionEvent.Type.ERROR, e.get(JAVA_LONG, offset(EQ_ERR_ENTRY, "fid")), 0,
                errno, LibFabric.strerror(errno) + " (provider errno " + e.get(JAVA_INT, offset(EQ_ERR_ENTRY,
                        "prov_errno")) + ")");
    }
}
