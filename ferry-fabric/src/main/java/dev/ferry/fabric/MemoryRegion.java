package dev.ferry.fabric;

import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.MR_DESC;
import static dev.ferry.fabric.InfoDescriptor.MR_KEY;

/**
 * Registered memory ({@code fid_mr}): its local descriptor for data calls, the key a peer
 * presents for RMA, and the address a peer names, which is the virtual address under
 * {@code FI_MR_VIRT_ADDR} and an offset into the region otherwise. Closing it does not free the
 * memory; the memory must outlive the region.
 */
public final class MemoryRegion extends FabricObject {

    private final MemorySegment segment;
    private final boolean virtualAddressing;
    private final boolean endpointBound;
    private final long descriptor;
    private final long key;

    MemoryRegion(long fid, Domain domain, MemorySegment segment, boolean virtualAddressing, boolean endpointBound) {
        super(fid, domain);
        this.segment = segment;
        this.virtualAddressing = virtualAddressing;
        this.endpointBound = endpointBound;
        this.descriptor = LibFabric.word(fid, MR_DESC);
        // Read the key back: under FI_MR_PROV_KEY the provider chose it.
        this.key = LibFabric.word(fid, MR_KEY);
    }

    /** The registered memory. */
    public MemorySegment segment() {
        return segment;
    }

    /** The local descriptor to pass with data calls on this memory. */
    public long descriptor() {
        return descriptor;
    }

    /** The key a peer presents to access this memory remotely. */
    public long key() {
        return key;
    }

    /** The address a peer names to reach the byte at {@code offset} into this region. */
    public long remoteAddress(long offset) {
        return virtualAddressing ? segment.address() + offset : offset;
    }

    /** Whether the provider wants this region bound to an endpoint ({@code FI_MR_ENDPOINT}). */
    public boolean needsEndpoint() {
        return endpointBound;
    }

    /**
     * Binds this region to {@code endpoint} and enables it, as {@code FI_MR_ENDPOINT} providers
     * require before the region is used; does nothing for other providers.
     */
    public void bind(Endpoint endpoint) {
        if (!endpointBound) {
            return;
        }
        ensureOpen();
        bindTo(endpoint, 0, "fi_mr_bind");
        control(LibFabric.FI_ENABLE, 0, "fi_mr_enable");
    }
}
