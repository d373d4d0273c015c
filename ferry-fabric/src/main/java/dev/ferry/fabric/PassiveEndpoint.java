package dev.ferry.fabric;

import static dev.ferry.fabric.InfoDescriptor.CM_LISTEN;
import static dev.ferry.fabric.InfoDescriptor.CM_REJECT;
import static dev.ferry.fabric.InfoDescriptor.EP_CM;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;

import java.lang.foreign.Arena;

/**
 * A passive endpoint ({@code fid_pep}): listens for connection requests, which arrive as
 * {@link ConnectionEvent.Type#CONNREQ} events on its bound event queue.
 */
public final class PassiveEndpoint extends FabricObject {

    private final long cm;

    PassiveEndpoint(long fid, Fabric fabric) {
        super(fid, fabric);
        this.cm = LibFabric.word(fid, EP_CM);
    }

    /** Sends connection events to {@code eq}. */
    public void bind(EventQueue eq) {
        ensureOpen();
        bindTo(eq, 0, "fi_pep_bind");
    }

    /** Starts listening. */
    public void listen() {
        ensureOpen();
        try {
            int rc = (int) LibFabric.I_J.invokeExact(LibFabric.function(cm, CM_LISTEN), fid);
            SignalGuard.restore();
            LibFabric.check(rc, "fi_listen");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** The address peers connect to (a {@code sockaddr} for tcp and verbs). */
    public byte[] name() {
        ensureOpen();
        return Names.getName(fid, cm);
    }

    /** Refuses a connection request. */
    public void reject(ConnectionEvent request) {
        reject(request, null);
    }

    /**
     * Refuses a connection request, handing the requester {@code data} (null for none) with the
     * refusal, where the provider carries it (tcp and verbs: in the connect's error entry).
     */
    public void reject(ConnectionEvent request, byte[] data) {
        ensureOpen();
        long handle = LibFabric.word(request.info().address, InfoDescriptor.offset(InfoDescriptor.INFO, "handle"));
        try (Arena arena = Arena.ofConfined()) {
            long param = data == null ? 0L : arena.allocateFrom(JAVA_BYTE, data).address();
            long length = data == null ? 0L : data.length;
            LibFabric.check((int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(cm, CM_REJECT), fid, handle, param,
                    length), "fi_reject");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
