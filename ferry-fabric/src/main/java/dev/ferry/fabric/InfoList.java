package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import static dev.ferry.fabric.InfoDescriptor.DOMAIN_ATTR;
import static dev.ferry.fabric.InfoDescriptor.EP_ATTR;
import static dev.ferry.fabric.InfoDescriptor.FABRIC_ATTR;
import static dev.ferry.fabric.InfoDescriptor.INFO;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static dev.ferry.fabric.LibFabric.MEMORY;
import static dev.ferry.fabric.LibFabric.word;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** The answer of {@code fi_getinfo}: owns the native list and frees it on close. */
public final class InfoList implements AutoCloseable {

    private final long head;
    private final List<FabricInfo> entries;
    private boolean closed;

    private InfoList(long head) {
        this.head = head;
        List<FabricInfo> list = new ArrayList<>();
        for (long p = head; p != 0; p = word(p, offset(INFO, "next"))) {
            list.add(new FabricInfo(p));
        }
        this.entries = Collections.unmodifiableList(list);
        FabricObject.OPENED.increment();
    }

    /**
     * Asks libfabric which providers can serve {@code hints}. An empty list means none can
     * ({@code -FI_ENODATA}); other failures throw.
     */
    public static InfoList query(Hints hints) {
        long h = allocHints(hints);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            long node = hints.node() == null ? 0 : arena.allocateFrom(hints.node()).address();
            long service = hints.service() == null ? 0 : arena.allocateFrom(hints.service()).address();
            long flags = hints.source() ? Fi.SOURCE : 0;
            int rc = (int) LibFabric.FI_GETINFO.invokeExact(LibFabric.apiVersion(), node, service, flags, h,
                    out.address());
            SignalGuard.restore(); // providers initialise on first use
            if (rc == -Errno.ENODATA) {
                return new InfoList(0);
            }
            LibFabric.check(rc, "fi_getinfo(" + hints + ")");
            return new InfoList(out.get(JAVA_LONG, 0));
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        } finally {
            free(h);
        }
    }

    private static long allocHints(Hints hints) {
        long h;
        try {
            h = (long) LibFabric.FI_DUPINFO.invokeExact(0L);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        if (h == 0) {
            throw new OutOfMemoryError("fi_allocinfo");
        }
        MEMORY.set(JAVA_LONG, h + offset(INFO, "caps"), hints.caps());
        MEMORY.set(JAVA_LONG, h + offset(INFO, "mode"), hints.mode());
        long ep = word(h, offset(INFO, "ep_attr"));
        MEMORY.set(JAVA_INT, ep + offset(EP_ATTR, "type"), hints.endpointType().code);
        if (hints.sharedReceive()) {
            MEMORY.set(JAVA_LONG, ep + offset(EP_ATTR, "rx_ctx_cnt"), InfoDescriptor.SHARED_CONTEXT);
        }
        long domain = word(h, offset(INFO, "domain_attr"));
        MEMORY.set(JAVA_INT, domain + offset(DOMAIN_ATTR, "mr_mode"), hints.mrMode());
        MEMORY.set(JAVA_INT, domain + offset(DOMAIN_ATTR, "threading"), hints.threading());
        if (hints.provider() != null) {
            long fabric = word(h, offset(INFO, "fabric_attr"));
            // fi_freeinfo frees prov_name, so it must come from malloc.
            MEMORY.set(JAVA_LONG, fabric + offset(FABRIC_ATTR, "prov_name"), LibFabric.strdup(hints.provider()));
        }
        return h;
    }

    /**
     * A native copy of {@code info} whose destination is {@code address} (the bytes of a peer's
     * name), for an endpoint that connects there; release it with {@link #free(long)}.
     */
    static long copyWithDestination(FabricInfo info, byte[] address) {
        long copy;
        try {
            copy = (long) LibFabric.FI_DUPINFO.invokeExact(info.address);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
        if (copy == 0) {
            throw new OutOfMemoryError("fi_dupinfo");
        }
        long previous = word(copy, offset(INFO, "dest_addr"));
        if (previous != 0) {
            LibFabric.free(previous);
        }
        // fi_freeinfo frees dest_addr, so it must come from malloc.
        MEMORY.set(JAVA_LONG, copy + offset(INFO, "dest_addr"), LibFabric.malloc(address));
        MEMORY.set(JAVA_LONG, copy + offset(INFO, "dest_addrlen"), (long) address.length);
        return copy;
    }

    /** Marks {@code info} (a native copy Ferry owns) as receiving through a shared context. */
    static void shareReceiveContext(FabricInfo info) {
        long ep = word(info.address, offset(INFO, "ep_attr"));
        MEMORY.set(JAVA_LONG, ep + offset(EP_ATTR, "rx_ctx_cnt"), InfoDescriptor.SHARED_CONTEXT);
    }

    static void free(long info) {
        if (info == 0) {
            return;
        }
        try {
            LibFabric.FI_FREEINFO.invokeExact(info);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** The providers that matched, best first. */
    public List<FabricInfo> entries() {
        return entries;
    }

    /** The first entry. */
    public FabricInfo first() {
        if (entries.isEmpty()) {
            throw new FabricException("no libfabric provider matches the hints");
        }
        return entries.getFirst();
    }

    /** Frees the native list; the entries become invalid. */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            free(head);
            FabricObject.CLOSED.increment();
        }
    }
}
