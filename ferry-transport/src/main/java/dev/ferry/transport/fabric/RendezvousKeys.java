package dev.ferry.transport.fabric;

import java.lang.foreign.MemorySegment;
import java.util.HashMap;
import java.util.Map;

import dev.ferry.fabric.Domain;
import dev.ferry.fabric.Fi;
import dev.ferry.fabric.MemoryRegion;

/**
 * The keys a sender advertises for its rendezvous transfers, one per transfer. Each payload is
 * registered again, exactly its bytes and for remote reads only, and the key is closed as soon
 * as the transfer ends (RNDV_DONE, a failed send, a torn-down peer). A peer therefore never
 * holds a key to the slab around a payload, nor to a payload once it has pulled it: on
 * providers that check keys and bounds (tcp, verbs), any other read fails.
 *
 * <p>Progress thread only, like every libfabric call of the transport.
 */
final class RendezvousKeys implements AutoCloseable {

    private final Domain domain;
    /** Open registrations by rendezvous cookie. */
    private final Map<Long, MemoryRegion> open = new HashMap<>();
    private long registered;
    private long revoked;
    /** Test hook: registrations still to refuse as a provider would ({@link #refuseForTest}). */
    private volatile int refusals;

    RendezvousKeys(Domain domain) {
        this.domain = domain;
    }

    /**
     * Writes the address and key of transfer {@code cookie} into its RNDV_REQ {@code frame},
     * registering the {@code length} bytes of payload that follow the frame the first time.
     *
     * @throws dev.ferry.fabric.FabricException if the provider refuses the registration
     */
    void advertise(long cookie, MemorySegment frame, long length) {
        MemoryRegion region = open.get(cookie);
        if (region == null) {
            if (refusals > 0) {
                refusals--;
                throw new dev.ferry.fabric.FabricException("fi_mr_reg refused (test)");
            }
            region = domain.register(frame.asSlice(FrameDescriptor.PAYLOAD_OFFSET, length), Fi.REMOTE_READ);
            registered++;
            open.put(cookie, region);
        }
        FrameDescriptor.rendezvous(frame, region.remoteAddress(0), region.key());
    }

    /** Closes the key of transfer {@code cookie}, if it is still open. */
    void revoke(long cookie) {
        MemoryRegion region = open.remove(cookie);
        if (region != null) {
            revoked++;
            region.close();
        }
    }

    /** Test hook: the next {@code n} registrations fail as the provider's refusal would. */
    void refuseForTest(int n) {
        refusals = n;
    }

    /** Keys registered so far and keys closed so far, for tests and diagnostics. */
    long[] counts() {
        return new long[] {registered, revoked};
    }

    /** Closes every key still open: the transport is going away. */
    @Override
    public void close() {
        for (long cookie : open.keySet().toArray(Long[]::new)) {
            revoke(cookie);
        }
    }
}
