package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.AV_INSERT;
import static dev.ferry.fabric.InfoDescriptor.AV_REMOVE;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** An address vector ({@code fid_av}): maps peers' raw addresses to {@code fi_addr_t} handles. */
public final class AddressVector extends FabricObject {

    AddressVector(long fid, Domain domain) {
        super(fid, domain);
    }

    /**
     * Inserts a peer's address exactly as its {@link Endpoint#name()} returned it.
     *
     * @return the handle to send to and read from that peer
     */
    public long insert(byte[] address) {
        ensureOpen();
        long ops = LibFabric.word(fid, OBJ_OPS);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment addr = arena.allocate(address.length);
            addr.copyFrom(MemorySegment.ofArray(address));
            MemorySegment out = arena.allocate(JAVA_LONG);
            int inserted = (int) LibFabric.I_JJJJJJ.invokeExact(LibFabric.function(ops, AV_INSERT), fid,
                    addr.address(), 1L, out.address(), 0L, 0L);
            SignalGuard.restore(); // shm maps the peer's region here
            LibFabric.check(inserted, "fi_av_insert");
            if (inserted != 1) {
                throw new FabricException("fi_av_insert rejected the address (" + address.length + " bytes)");
            }
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** Removes a handle returned by {@link #insert}. */
    public void remove(long handle) {
        ensureOpen();
        long ops = LibFabric.word(fid, OBJ_OPS);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment in = arena.allocateFrom(JAVA_LONG, handle);
            int rc = (int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(ops, AV_REMOVE), fid, in.address(), 1L, 0L);
            SignalGuard.restore();
            LibFabric.check(rc, "fi_av_remove");
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
