package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;

import static dev.ferry.fabric.InfoDescriptor.AV_ATTR;
import static dev.ferry.fabric.InfoDescriptor.CQ_ATTR;
import static dev.ferry.fabric.InfoDescriptor.DOMAIN_AV_OPEN;
import static dev.ferry.fabric.InfoDescriptor.DOMAIN_CQ_OPEN;
import static dev.ferry.fabric.InfoDescriptor.DOMAIN_ENDPOINT;
import static dev.ferry.fabric.InfoDescriptor.DOMAIN_MR;
import static dev.ferry.fabric.InfoDescriptor.DOMAIN_SRX_CTX;
import static dev.ferry.fabric.InfoDescriptor.RX_ATTR;
import static dev.ferry.fabric.InfoDescriptor.MR_REG;
import static dev.ferry.fabric.InfoDescriptor.OBJ_OPS;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A libfabric domain ({@code fi_domain}): one NIC or provider instance. Memory is registered
 * here, and completion queues, address vectors and endpoints are opened from it.
 */
public final class Domain extends FabricObject {

    /** Access for memory used by local sends and receives and by remote reads and writes. */
    public static final long ACCESS_ALL = Fi.SEND | Fi.RECV | Fi.READ | Fi.WRITE | Fi.REMOTE_READ | Fi.REMOTE_WRITE;

    private final String provider;
    private final int mrMode;
    private final long mrKeySize;
    private final long cqDataSize;
    private final boolean remoteDataConsumesReceive;
    private final long injectSize;
    /**
     * Where the provider does not pick keys, requested keys must be unique per domain. They are
     * never reused either, so a key closed with its region cannot come to name another one.
     */
    private final AtomicLong nextKey = new AtomicLong(1);

    Domain(long fid, Fabric fabric, FabricInfo info) {
        super(fid, fabric);
        this.provider = info.provider();
        this.mrMode = info.mrMode();
        this.mrKeySize = info.mrKeySize();
        this.cqDataSize = info.cqDataSize();
        this.remoteDataConsumesReceive = (info.mode() & Fi.RX_CQ_DATA) != 0;
        this.injectSize = info.injectSize();
    }

    /** The provider name. */
    public String provider() {
        return provider;
    }

    /** The memory-registration modes in force. */
    public int mrMode() {
        return mrMode;
    }

    /** Bytes of immediate data a message may carry. */
    public long cqDataSize() {
        return cqDataSize;
    }

    /**
     * Whether an RMA write with immediate data ({@link Endpoint#writeData}) consumes a receive
     * posted at the target, whose completion then carries the data ({@code FI_RX_CQ_DATA} in the
     * info's mode: verbs MSG). The target must keep a receive posted for every such write, or
     * the write fails (a receiver-not-ready error on verbs). Messages with immediate data
     * ({@link Endpoint#sendData}) consume a receive everywhere, as any message does.
     */
    public boolean remoteDataConsumesReceive() {
        return remoteDataConsumesReceive;
    }

    /** The inject size of the info this domain was opened with. */
    public long injectSize() {
        return injectSize;
    }

    /**
     * Opens a completion queue of {@code size} entries in the {@code FI_CQ_FORMAT_DATA} format.
     * With {@code waitable}, the queue gets a file-descriptor wait object, so that
     * {@link CompletionQueue#await} sleeps in the kernel until a completion or a
     * {@link CompletionQueue#signal}; providers that could only busy-wait refuse it (shm 1.17,
     * whose unspecified wait object spins a core), so ask without first only when blocking matters.
     */
    public CompletionQueue openCompletionQueue(int size, boolean waitable) {
        return openChild(() -> {
            long ops = LibFabric.word(fid, OBJ_OPS);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment attr = arena.allocate(CQ_ATTR);
                attr.set(JAVA_LONG, offset(CQ_ATTR, "size"), size);
                attr.set(JAVA_INT, offset(CQ_ATTR, "format"), 3); // FI_CQ_FORMAT_DATA
                attr.set(JAVA_INT, offset(CQ_ATTR, "wait_obj"), waitable ? 3 : 0); // FI_WAIT_FD : FI_WAIT_NONE
                long cq = Fabric.openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(
                        LibFabric.function(ops, DOMAIN_CQ_OPEN), fid, attr.address(), a, 0L), "fi_cq_open");
                return new CompletionQueue(cq, this, waitable);
            }
        });
    }

    /** Opens an address vector (a table of peer addresses) for reliable-datagram endpoints. */
    public AddressVector openAddressVector(int count) {
        return openChild(() -> {
            long ops = LibFabric.word(fid, OBJ_OPS);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment attr = arena.allocate(AV_ATTR);
                attr.set(JAVA_INT, offset(AV_ATTR, "type"), 0); // FI_AV_UNSPEC: the provider's choice
                attr.set(JAVA_LONG, offset(AV_ATTR, "count"), count);
                long av = Fabric.openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(
                        LibFabric.function(ops, DOMAIN_AV_OPEN), fid, attr.address(), a, 0L), "fi_av_open");
                return new AddressVector(av, this);
            }
        });
    }

    /** Opens an active endpoint from {@code info}: from discovery, or from a connection request. */
    public Endpoint openEndpoint(FabricInfo info) {
        return openChild(() -> {
            long ops = LibFabric.word(fid, OBJ_OPS);
            long ep = Fabric.openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(
                    LibFabric.function(ops, DOMAIN_ENDPOINT), fid, info.address, a, 0L), "fi_endpoint");
            return new Endpoint(ep, this, info);
        });
    }

    /**
     * Opens a shared receive context of {@code size} entries ({@code fi_srx_context}) for
     * connected endpoints opened from an info that shares receive contexts
     * ({@link FabricInfo#sharesReceiveContext()}).
     */
    public SharedReceiveContext openSharedReceiveContext(long size) {
        return openChild(() -> {
            long ops = LibFabric.word(fid, OBJ_OPS);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment attr = arena.allocate(RX_ATTR);
                attr.set(JAVA_LONG, offset(RX_ATTR, "caps"), Fi.MSG | Fi.RECV);
                attr.set(JAVA_LONG, offset(RX_ATTR, "size"), size);
                attr.set(JAVA_LONG, offset(RX_ATTR, "iov_limit"), 1L);
                long srx = Fabric.openObject(a -> (int) LibFabric.I_JJJJ.invokeExact(
                        LibFabric.function(ops, DOMAIN_SRX_CTX), fid, attr.address(), a, 0L), "fi_srx_context");
                return new SharedReceiveContext(srx, this);
            }
        });
    }

    /**
     * Registers {@code segment} ({@code fi_mr_reg}) for {@code access} ({@link #ACCESS_ALL} by
     * default), under a key of its own. The memory must stay allocated until the region is
     * closed. Memory may be registered more than once: a region over part of a registered one
     * exposes exactly that part, with its own access and key, and its remote address 0 names its
     * first byte where addresses are offsets. Under {@code FI_MR_ENDPOINT} the region must also
     * be {@link MemoryRegion#bind bound} to an endpoint before use.
     */
    public MemoryRegion register(MemorySegment segment, long access) {
        return openChild(() -> {
            long key = requestedKey();
            long mrOps = LibFabric.word(fid, DOMAIN_MR);
            long mr = Fabric.openObject(a -> (int) LibFabric.I_JJJJJJJJJ.invokeExact(LibFabric.function(mrOps, MR_REG),
                    fid, segment.address(), segment.byteSize(), access, 0L, key, 0L, a, 0L),
                    "fi_mr_reg(" + segment.byteSize() + " B)", false);
            return new MemoryRegion(mr, this, segment, (mrMode & Fi.MR_VIRT_ADDR) != 0, (mrMode & Fi.MR_ENDPOINT) != 0);
        });
    }

    /** Registers {@code segment} for all local and remote access. */
    public MemoryRegion register(MemorySegment segment) {
        return register(segment, ACCESS_ALL);
    }

    private long requestedKey() {
        if ((mrMode & Fi.MR_PROV_KEY) != 0) {
            return 0; // ignored: the provider picks the key
        }
        long key = nextKey.getAndIncrement();
        if (mrKeySize > 0 && mrKeySize < 8 && key >= 1L << (8 * mrKeySize)) {
            throw new FabricException("memory keys exhausted for " + mrKeySize + "-byte keys");
        }
        return key;
    }
}
