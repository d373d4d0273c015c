package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.CM_ACCEPT;
import static dev.ferry.fabric.InfoDescriptor.CM_CONNECT;
import static dev.ferry.fabric.InfoDescriptor.CM_SHUTDOWN;
import static dev.ferry.fabric.InfoDescriptor.EP_CM;
import static dev.ferry.fabric.InfoDescriptor.EP_MSG;
import static dev.ferry.fabric.InfoDescriptor.EP_RMA;
import static dev.ferry.fabric.InfoDescriptor.EP_RX_SIZE_LEFT;
import static dev.ferry.fabric.InfoDescriptor.EP_TX_SIZE_LEFT;
import static dev.ferry.fabric.InfoDescriptor.INFO;
import static dev.ferry.fabric.InfoDescriptor.MSG_INJECT;
import static dev.ferry.fabric.InfoDescriptor.MSG_INJECTDATA;
import static dev.ferry.fabric.InfoDescriptor.MSG_RECV;
import static dev.ferry.fabric.InfoDescriptor.MSG_SEND;
import static dev.ferry.fabric.InfoDescriptor.MSG_SENDDATA;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static dev.ferry.fabric.InfoDescriptor.RMA_READ;
import static dev.ferry.fabric.InfoDescriptor.RMA_WRITE;
import static dev.ferry.fabric.InfoDescriptor.RMA_WRITEDATA;
import static dev.ferry.fabric.InfoDescriptor.offset;

/**
 * An active endpoint ({@code fid_ep}): a queue pair on connected providers, or a reliable
 * datagram endpoint addressed through an {@link AddressVector}.
 *
 * <p>Data calls take raw addresses ({@link MemorySegment#address()}), a descriptor from
 * {@link MemoryRegion#descriptor()}, a peer handle ({@link Fi#ADDR_UNSPEC} on connected
 * endpoints) and a context (see {@link OperationContexts}). They return {@code true} once posted
 * and {@code false} on {@code -FI_EAGAIN}: the queue is full, so progress the completion queue
 * and retry. Any other failure throws. They allocate nothing.
 */
public final class Endpoint extends FabricObject {

    private final EndpointType type;
    private final long cm;
    private final MemorySegment recvFn;
    private final MemorySegment sendFn;
    private final MemorySegment injectFn;
    private final MemorySegment senddataFn;
    private final MemorySegment injectdataFn;
    private final MemorySegment readFn;
    private final MemorySegment writeFn;
    private final MemorySegment writedataFn;
    private final long epOps;

    Endpoint(long fid, Domain domain, FabricInfo info) {
        super(fid, domain);
        this.type = info.endpointType();
        this.cm = LibFabric.word(fid, EP_CM);
        this.epOps = LibFabric.word(fid, OBJ_OPS);
        long msg = LibFabric.word(fid, EP_MSG);
        long rma = LibFabric.word(fid, EP_RMA);
        this.recvFn = LibFabric.function(msg, MSG_RECV);
        this.sendFn = LibFabric.function(msg, MSG_SEND);
        this.injectFn = LibFabric.function(msg, MSG_INJECT);
        this.senddataFn = LibFabric.function(msg, MSG_SENDDATA);
        this.injectdataFn = LibFabric.function(msg, MSG_INJECTDATA);
        this.readFn = rma == 0 ? null : LibFabric.function(rma, RMA_READ);
        this.writeFn = rma == 0 ? null : LibFabric.function(rma, RMA_WRITE);
        this.writedataFn = rma == 0 ? null : LibFabric.function(rma, RMA_WRITEDATA);
    }

    /** The endpoint type. */
    public EndpointType type() {
        return type;
    }

    /** Reports this endpoint's completions to {@code cq}: {@code Fi.TRANSMIT}, {@code Fi.RECV} or both. */
    public void bind(CompletionQueue cq, long flags) {
        ensureOpen();
        bindTo(cq, flags, "fi_ep_bind(cq)");
    }

    /** Reports connection events to {@code eq}. */
    public void bind(EventQueue eq) {
        ensureOpen();
        bindTo(eq, 0, "fi_ep_bind(eq)");
    }

    /** Resolves peer handles through {@code av}. */
    public void bind(AddressVector av) {
        ensureOpen();
        bindTo(av, 0, "fi_ep_bind(av)");
    }

    /**
     * Takes this endpoint's receives from {@code srx} instead of a queue of its own; before
     * {@link #enable()}. Receives are then posted to the context, not to the endpoint.
     */
    public void bind(SharedReceiveContext srx) {
        ensureOpen();
        bindTo(srx, 0, "fi_ep_bind(srx)");
    }

    /** Enables the endpoint once it is bound. */
    public void enable() {
        ensureOpen();
        control(LibFabric.FI_ENABLE, 0, "fi_enable");
    }

    /** This endpoint's address, for peers to insert into their address vectors. */
    public byte[] name() {
        ensureOpen();
        return Names.getName(fid, cm);
    }

    /** Starts connecting to the destination that {@code info} resolved; completion is a CONNECTED event. */
    public void connect(FabricInfo info) {
        ensureOpen();
        long dest = LibFabric.word(info.address, offset(INFO, "dest_addr"));
        if (dest == 0) {
            throw new FabricException("the info has no destination address: query with Hints.remoteAddress");
        }
        connectTo(dest);
    }

    /** Starts connecting to a raw address (such as a passive endpoint's {@link PassiveEndpoint#name()}). */
    public void connect(byte[] address) {
        connect(address, new byte[0]);
    }

    /**
     * Starts connecting to a raw address, with {@code data} (a few bytes) delivered to the
     * listener in its {@link ConnectionEvent#data() connection request}.
     */
    public void connect(byte[] address, byte[] data) {
        ensureOpen();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = arena.allocate(address.length);
            addr.copyFrom(MemorySegment.ofArray(address));
            MemorySegment param = arena.allocate(Math.max(1, data.length));
            param.copyFrom(MemorySegment.ofArray(data));
            connectTo(addr.address(), data.length == 0 ? 0 : param.address(), data.length);
        }
    }

    private void connectTo(long address) {
        connectTo(address, 0, 0);
    }

    private void connectTo(long address, long param, long paramLength) {
        try {
            int rc = (int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(cm, CM_CONNECT), fid, address, param,
                    paramLength);
            SignalGuard.restore();
            LibFabric.check(rc, "fi_connect");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Accepts the connection request this endpoint was opened from. */
    public void accept() {
        ensureOpen();
        try {
            int rc = (int) LibFabric.I_JJJ.invokeExact(LibFabric.function(cm, CM_ACCEPT), fid, 0L, 0L);
            SignalGuard.restore();
            LibFabric.check(rc, "fi_accept");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Shuts the connection down; the peer sees a SHUTDOWN event. */
    public void shutdown() {
        ensureOpen();
        try {
            LibFabric.check((int) LibFabric.I_JJ.invokeExact(LibFabric.function(cm, CM_SHUTDOWN), fid, 0L),
                    "fi_shutdown");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Posts a receive buffer. */
    public boolean recv(long buffer, long length, long descriptor, long source, long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJ.invokeExact(recvFn, fid, buffer, length, descriptor, source,
                    context), "fi_recv");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Sends {@code length} bytes at {@code buffer}. */
    public boolean send(long buffer, long length, long descriptor, long destination, long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJ.invokeExact(sendFn, fid, buffer, length, descriptor, destination,
                    context), "fi_send");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Sends with 64 bits of immediate data, delivered in the receiver's completion. */
    public boolean sendData(long buffer, long length, long descriptor, long data, long destination, long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJJ.invokeExact(senddataFn, fid, buffer, length, descriptor, data,
                    destination, context), "fi_senddata");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Sends a small message (up to the inject size) with no completion; the buffer is reusable at once. */
    public boolean inject(long buffer, long length, long destination) {
        try {
            return posted((long) LibFabric.L_JJJJ.invokeExact(injectFn, fid, buffer, length, destination),
                    "fi_inject");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** {@link #inject} with immediate data. */
    public boolean injectData(long buffer, long length, long data, long destination) {
        try {
            return posted((long) LibFabric.L_JJJJJ.invokeExact(injectdataFn, fid, buffer, length, data, destination),
                    "fi_injectdata");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Reads {@code length} bytes of the peer's registered memory at {@code remoteAddress} into {@code buffer}. */
    public boolean read(long buffer, long length, long descriptor, long source, long remoteAddress, long key,
            long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJJJ.invokeExact(rma(readFn), fid, buffer, length, descriptor, source,
                    remoteAddress, key, context), "fi_read");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Writes {@code length} bytes at {@code buffer} into the peer's registered memory. */
    public boolean write(long buffer, long length, long descriptor, long destination, long remoteAddress, long key,
            long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJJJ.invokeExact(rma(writeFn), fid, buffer, length, descriptor,
                    destination, remoteAddress, key, context), "fi_write");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** {@link #write} with immediate data, which completes a receive at the peer. */
    public boolean writeData(long buffer, long length, long descriptor, long data, long destination,
            long remoteAddress, long key, long context) {
        try {
            return posted((long) LibFabric.L_JJJJJJJJJ.invokeExact(rma(writedataFn), fid, buffer, length, descriptor,
                    data, destination, remoteAddress, key, context), "fi_writedata");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Free transmit queue entries, where the provider reports them. */
    public long txSizeLeft() {
        return sizeLeft(EP_TX_SIZE_LEFT);
    }

    /** Free receive queue entries, where the provider reports them. */
    public long rxSizeLeft() {
        return sizeLeft(EP_RX_SIZE_LEFT);
    }

    private long sizeLeft(long offset) {
        long fn = LibFabric.word(epOps, offset);
        if (fn == 0) {
            return -1;
        }
        try {
            long rc = (long) LibFabric.L_J.invokeExact(MemorySegment.ofAddress(fn), fid);
            return rc < 0 ? -1 : rc;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static MemorySegment rma(MemorySegment fn) {
        if (fn == null) {
            throw new FabricException("endpoint has no RMA operations: ask for Fi.RMA in the hints");
        }
        return fn;
    }

    private static boolean posted(long rc, String what) {
        if (rc == 0) {
            return true;
        }
        if (rc == -Errno.EAGAIN) {
            return false;
        }
        throw FabricException.of((int) -rc, what);
    }
}
