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

/** An event queue ({@code fid_eq}) for connection management events. */
public final class EventQueue extends FabricObject {

    private static final int FI_CONNREQ = 1;
    private static final int FI_CONNECTED = 2;
    private static final int FI_SHUTDOWN = 3;
    private static final long ENTRY_BYTES = 256;

    EventQueue(long fid, Fabric fabric) {
        super(fid, fabric);
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
        ensureOpen();
        long ops = LibFabric.word(fid, OBJ_OPS);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment event = arena.allocate(JAVA_INT);
            MemorySegment entry = arena.allocate(ENTRY_BYTES, 8);
            // tcp's connection manager runs inside this read and trusts errno: see ListenerSocket.
            ListenerSocket.clearErrno();
            long rc = timeoutMillis < 0
                    ? (long) LibFabric.L_JJJJJ.invokeExact(LibFabric.function(ops, EQ_READ), fid, event.address(),
                            entry.address(), ENTRY_BYTES, 0L)
                    : (long) LibFabric.L_JJJJIJ.invokeExact(LibFabric.function(ops, EQ_SREAD), fid, event.address(),
                            entry.address(), ENTRY_BYTES, timeoutMillis, 0L);
            if (rc == -Errno.EAGAIN || rc == -110 /* ETIMEDOUT */) {
                return null;
            }
            if (rc == -Errno.FI_EAVAIL) {
                return readError(ops, arena);
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

    private ConnectionEvent readError(long ops, Arena arena) throws Throwable {
        MemorySegment e = arena.allocate(EQ_ERR_ENTRY);
        long rc = (long) LibFabric.L_JJJ.invokeExact(LibFabric.function(ops, EQ_READERR), fid, e.address(), 0L);
        LibFabric.check(rc, "fi_eq_readerr");
        int errno = e.get(JAVA_INT, offset(EQ_ERR_ENTRY, "err"));
        return new ConnectionEvent(ConnectionEvent.Type.ERROR, e.get(JAVA_LONG, offset(EQ_ERR_ENTRY, "fid")), 0,
                errno, LibFabric.strerror(errno) + " (provider errno " + e.get(JAVA_INT, offset(EQ_ERR_ENTRY,
                        "prov_errno")) + ")");
    }
}
