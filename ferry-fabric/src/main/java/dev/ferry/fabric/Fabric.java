package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.EQ_ATTR;
import static dev.ferry.fabric.InfoDescriptor.FABRIC_DOMAIN;
import static dev.ferry.fabric.InfoDescriptor.FABRIC_EQ_OPEN;
import static dev.ferry.fabric.InfoDescriptor.FABRIC_PASSIVE_EP;
import static dev.ferry.fabric.InfoDescriptor.INFO;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A libfabric fabric ({@code fi_fabric}): the root from which domains, event queues and
 * passive endpoints are opened. Closing it closes everything opened from it.
 */
public final class Fabric extends FabricObject {

    private final String provider;

    private Fabric(long fid, String provider) {
        super(fid, null);
        this.provider = provider;
    }

    /** Opens the fabric of {@code info}. */
    public static Fabric open(FabricInfo info) {
        long attr = LibFabric.word(info.address, offset(INFO, "fabric_attr"));
        long fabric = openObject(a -> (int) LibFabric.FI_FABRIC.invokeExact(attr, a, 0L), "fi_fabric");
        return new Fabric(fabric, info.provider());
    }

    /** The provider this fabric belongs to. */
    public String provider() {
        return provider;
    }

    /** libfabric's own version, e.g. {@code 1.17}. */
    public static String libraryVersion() {
        int v = LibFabric.libraryVersion();
        return (v >>> 16) + "." + (v & 0xffff);
    }

    /** Opens a domain (one NIC, or one shm/tcp instance) of {@code info}. */
    public Domain openDomain(FabricInfo info) {
        return openChild(() -> {
            long fn = LibFabric.word(fid, OBJ_OPS);
            long dom = openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(fn, FABRIC_DOMAIN), fid,
                    info.address, a, 0L), "fi_domain");
            return new Domain(dom, this, info);
        });
    }

    /**
     * Opens an event queue for connection events, with a wait object so that
     * {@link EventQueue#await} can block.
     */
    public EventQueue openEventQueue(int size) {
        return openChild(() -> {
            long fn = LibFabric.word(fid, OBJ_OPS);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment attr = arena.allocate(EQ_ATTR);
                attr.set(JAVA_LONG, offset(EQ_ATTR, "size"), size);
                attr.set(JAVA_INT, offset(EQ_ATTR, "wait_obj"), 1); // FI_WAIT_UNSPEC: fi_eq_sread needs one
                long eq = openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(fn, FABRIC_EQ_OPEN), fid,
                        attr.address(), a, 0L), "fi_eq_open");
                return new EventQueue(eq, this);
            }
        });
    }

    /** Opens a passive endpoint (a listener) for connected ({@link EndpointType#MSG}) endpoints. */
    public PassiveEndpoint openPassiveEndpoint(FabricInfo info) {
        return openChild(() -> {
            long fn = LibFabric.word(fid, OBJ_OPS);
            long pep = openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(LibFabric.function(fn, FABRIC_PASSIVE_EP), fid,
                    info.address, a, 0L), "fi_passive_ep");
            return new PassiveEndpoint(pep, this);
        });
    }

    /** A native call that stores a new object's address through its last out-pointer. */
    @FunctionalInterface
    interface Opener {
        int open(long out) throws Throwable;
    }

    static long openObject(Opener opener, String what) {
        return openObject(opener, what, true);
    }

    /**
     * Opens an object; with {@code guard}, puts the JVM's signal handlers back afterwards (shm
     * installs its own in {@code fi_endpoint}, psm2 and opx in theirs). Memory registration,
     * which installs none and runs once per rendezvous transfer, goes without.
     */
    static long openObject(Opener opener, String what, boolean guard) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            int rc = opener.open(out.address());
            if (guard) {
                SignalGuard.restore();
            }
            LibFabric.check(rc, what);
            return out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
