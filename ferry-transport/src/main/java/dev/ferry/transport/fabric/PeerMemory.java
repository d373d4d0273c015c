package dev.ferry.transport.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.SharedMemory;

/**
 * The send slabs of one peer process on this host, mapped read-only, so that a message the peer
 * sends by reference ({@link FrameDescriptor#RNDV_SHARED}) is delivered as a view of the peer's
 * own buffer: no copy across the processes, neither by the provider nor by a read. The peer keeps
 * the buffer until this side releases the message (RNDV_DONE), as for a rendezvous.
 *
 * <p>A slab is mapped the first time a message names it ({@link SharedMemory#mapPeer}, which
 * checks the file's name, seals and size) and stays mapped while the peer lives; a mapping that
 * messages still use when the peer goes is unmapped when the last one is released. Every offset
 * and length a peer names is checked against the slab it names before a view is made. A view
 * used after its mapping closed throws ({@link IllegalStateException}) instead of reading memory
 * that is no longer there.
 *
 * <p>Made on the control plane's thread at the handshake (after the peer's probe was opened),
 * used only by the token's holder from then on.
 */
final class PeerMemory {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /** Slab indexes beyond this are refused: a peer cannot make this side keep mappings without bound. */
    static final int MAX_SLAB_INDEX = 1 << 16;
    /** Past this many mapped slabs, the idle ones are unmapped (slabs the peer freed stay mapped until then). */
    static final int MAX_MAPPED = 256;

    private final long pid;
    private final String prefix;
    private Slab[] slabs = new Slab[16];
    private int mapped;
    private boolean closed;
    /** Why the last {@link #view} failed, for the link's failure. */
    private String refusal;

    /** One mapped slab of the peer and the messages delivered from it and not yet released. */
    static final class Slab {
        final int index;
        final Arena arena;
        final MemorySegment segment;
        int inUse;
        boolean retired;
        private boolean unmapped;

        Slab(int index, Arena arena, MemorySegment segment) {
            this.index = index;
            this.arena = arena;
            this.segment = segment;
        }
    }

    PeerMemory(long pid, String prefix) {
        this.pid = pid;
        this.prefix = prefix;
    }

    /**
     * Opens the peer's probe ({@link RegisteredAllocator#sharedProbeFd}): whether this process may
     * map the peer's slabs. Control plane thread (file system calls, not on the progress path).
     *
     * @return the peer's memory, or null (logged) if it cannot be mapped from here
     */
    static PeerMemory probe(String address, long pid, int probeFd, String prefix) {
        if (prefix.isEmpty() || pid <= 0 || probeFd < 0) {
            return null;
        }
        try {
            SharedMemory.probe(pid, probeFd, prefix + "-probe");
            return new PeerMemory(pid, prefix);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, () -> "cannot map the send memory of " + address + ": " + e.getMessage());
            return null;
        }
    }

    /**
     * The view of {@code length} bytes at {@code offset} of slab {@code index} (descriptor
     * {@code fd} in the peer), counted as in use until {@link #release}; null if the peer named
     * memory it does not have or that cannot be mapped ({@link #refusal} says why).
     */
    MemorySegment view(int index, int fd, long offset, long length) {
        assert !closed;
        if (index < 0 || index >= MAX_SLAB_INDEX) {
            refusal = "slab index " + index + " out of range";
            return null;
        }
        Slab slab = index < slabs.length ? slabs[index] : null;
        if (slab == null) {
            slab = map(index, fd);
            if (slab == null) {
                return null;
            }
        }
        long size = slab.segment.byteSize();
        if (offset < 0 || length <= 0 || offset > size - length) {
            refusal = length + " bytes at " + offset + " outside slab " + index + " of " + size + " bytes";
            return null;
        }
        slab.inUse++;
        return slab.segment.asSlice(offset, length);
    }

    /** The slab {@code index} that a view came from, for its {@link #release}. */
    Slab slab(int index) {
        return slabs[index];
    }

    /** A message delivered from {@code slab} was released; a retired slab is unmapped with its last. */
    void release(Slab slab) {
        if (--slab.inUse == 0 && slab.retired) {
            unmap(slab);
        }
    }

    /** Why the last view was refused. */
    String refusal() {
        return refusal;
    }

    /** Slabs mapped now; for tests. */
    int mapped() {
        return mapped;
    }

    private Slab map(int index, int fd) {
        if (mapped >= MAX_MAPPED) {
            unmapIdle();
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = SharedMemory.mapPeer(arena, pid, fd, RegisteredAllocator.sharedName(prefix, index), 0);
            Slab slab = new Slab(index, arena, segment);
            if (index >= slabs.length) {
                slabs = java.util.Arrays.copyOf(slabs, Math.min(MAX_SLAB_INDEX, Math.max(index + 1, slabs.length * 2)));
            }
            slabs[index] = slab;
            mapped++;
            return slab;
        } catch (IOException | RuntimeException e) {
            arena.close();
            refusal = "cannot map slab " + index + " of process " + pid + ": " + e.getMessage();
            return null;
        }
    }

    /** Unmaps the slabs no delivered message uses; they are mapped again when named. */
    private void unmapIdle() {
        for (int i = 0; i < slabs.length; i++) {
            Slab slab = slabs[i];
            if (slab != null && slab.inUse == 0 && !slab.retired) {
                unmap(slab);
                slabs[i] = null;
                mapped--;
            }
        }
    }

    /**
     * The peer is gone: idle slabs are unmapped now, the others when their last message is released.
     * Token holder.
     */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (Slab slab : slabs) {
            if (slab != null) {
                slab.retired = true;
                if (slab.inUse == 0) {
                    unmap(slab);
                }
            }
        }
    }

    /** The transport closes: every mapping goes, also those a message not yet released still uses. */
    void closeAll() {
        closed = true;
        for (Slab slab : slabs) {
            if (slab != null) {
                unmap(slab);
            }
        }
    }

    private static void unmap(Slab slab) {
        if (!slab.unmapped) {
            slab.unmapped = true;
            slab.arena.close();
        }
    }
}
