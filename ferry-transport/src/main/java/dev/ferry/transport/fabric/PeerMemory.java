package dev.ferry.transport.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

import dev.ferry.memory.RegisteredAllocator;
import dev.ferry.memory.SharedMemory;

/**
 * The send slabs of one peer process on this host, mapped read-only, so that a message the peer
 * sends by reference ({@link FrameDescriptor#RNDV_SHARED}) is delivered as a view of the peer's
 * own buffer: no copy across the processes, neither by the provider nor by a read. The peer keeps
 * the buffer until this side releases the message (RNDV_DONE), as for a rendezvous.
 *
 * <p>A slab is mapped the first time a message names it ({@link SharedMemory#mapPeer}, which
 * checks the file's name, seals and size, at most {@link #MAX_SLAB_BYTES}) and stays mapped while
 * the peer lives; past {@link #MAX_MAPPED} slabs (the peer freed some and made others) the idle
 * ones are unmapped and mapped again when named. Every offset and length a peer names is checked
 * against the slab it names before a view is made. When the peer goes, idle slabs are unmapped at
 * once and the others with their last message; if its process lives on, after
 * {@link #RETIRED_GRACE_NANOS} at the latest, since it reuses its buffers after its own longer
 * grace ({@link AwaitedReleases#LENT_GRACE_NANOS}) and a view must not show another message by
 * then. A dead process's slabs cannot change: its messages stay readable until released.
 * A view used after its mapping closed throws ({@link IllegalStateException}) instead of reading
 * memory that is no longer there.
 *
 * <p>Made on the control plane's thread at the handshake (after the peer's probe was opened),
 * used only by the token's holder from then on.
 */
final class PeerMemory {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    /** Past this many mapped slabs, the idle ones are unmapped. */
    static final int MAX_MAPPED = 64;
    /** The largest slab mapped: a peer cannot make this side reserve address space without bound. */
    static final long MAX_SLAB_BYTES = 256L << 20;
    /** How long the slabs of a gone peer stay mapped for messages still held (less than the sender's grace). */
    static final long RETIRED_GRACE_NANOS = 2_000_000_000L;

    private final long pid;
    private final String prefix;
    /** Mapped slabs by index: open addressing, linear probing, at most a quarter full. */
    private int[] keys = new int[4 * MAX_MAPPED];
    private Slab[] values = new Slab[4 * MAX_MAPPED];
    private int mapped;
    /** Every slab mapped and not yet unmapped, retired ones too (for {@link #closeAll}). */
    private Slab[] live = new Slab[16];
    private int liveCount;
    private boolean closed;
    private long closedAtNanos;
    /** Why the last {@link #acquire} failed, for the link's failure. */
    private String refusal;

    /**
     * Views kept per slab at most ({@link Slab#view}): one per 4 KiB of a 16 MiB slab (the
     * allocator's), 32 KiB of references; larger slabs share the entries.
     */
    private static final int MAX_VIEWS = 1 << 12;

    /** One mapped slab of the peer and the messages delivered from it and not yet released. */
    static final class Slab {
        final int index;
        final Arena arena;
        final MemorySegment segment;
        int inUse;
        boolean retired;
        private boolean unmapped;
        /**
         * Views handed out lately, by offset and length: a sender reuses its buffers, so the same
         * views come back, and one made once serves every message that names it again.
         */
        private MemorySegment[] views;

        Slab(int index, Arena arena, MemorySegment segment) {
            this.index = index;
            this.arena = arena;
            this.segment = segment;
        }

        /**
         * The view of {@code length} bytes at {@code offset} (checked by {@link #acquire}), made once and
         * kept: one per 4 KiB of the slab, the last made there (messages by reference are larger).
         */
        MemorySegment view(long offset, long length) {
            if (views == null) {
                views = new MemorySegment[(int) Math.min(MAX_VIEWS, (segment.byteSize() + 4095) >>> 12)];
            }
            int i = (int) ((offset >>> 12) % views.length);
            MemorySegment v = views[i];
            if (v == null || v.address() != segment.address() + offset || v.byteSize() != length) {
                v = segment.asSlice(offset, length);
                views[i] = v;
            }
            return v;
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
     * Slab {@code index} (descriptor {@code fd} in the peer), checked to hold {@code length}
     * bytes at {@code offset} ({@link Slab#view} makes the view) and counted as in use until
     * {@link #release}; null if the peer named memory it does not have or that cannot be mapped
     * ({@link #refusal} says why).
     */
    Slab acquire(int index, int fd, long offset, long length) {
        assert !closed;
        if (index < 0) {
            refusal = "slab index " + index + " out of range";
            return null;
        }
        Slab slab = find(index);
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
        return slab;
    }

    /** A message delivered from {@code slab} was released; a retired slab is unmapped with its last. */
    void release(Slab slab) {
        if (--slab.inUse == 0 && slab.retired) {
            unmap(slab);
        }
    }

    /** Why the last {@link #acquire} was refused. */
    String refusal() {
        return refusal;
    }

    /** Slabs mapped now; for tests. */
    int mapped() {
        return mapped;
    }

    private Slab find(int index) {
        int mask = keys.length - 1;
        for (int i = mix(index) & mask; ; i = (i + 1) & mask) {
            Slab slab = values[i];
            if (slab == null || keys[i] == index) {
                return slab;
            }
        }
    }

    private void insert(Slab slab) {
        int mask = keys.length - 1;
        int i = mix(slab.index) & mask;
        while (values[i] != null) {
            i = (i + 1) & mask;
        }
        keys[i] = slab.index;
        values[i] = slab;
    }

    private static int mix(int index) {
        return index * 0x9E3779B9 >>> 7;
    }

    private Slab map(int index, int fd) {
        if (mapped >= MAX_MAPPED) {
            unmapIdle();
            if (mapped >= MAX_MAPPED) {
                refusal = "the peer has " + mapped + " slabs in use by messages held here";
                return null;
            }
        }
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = SharedMemory.mapPeer(arena, pid, fd, RegisteredAllocator.sharedName(prefix, index), 0,
                    MAX_SLAB_BYTES);
            Slab slab = new Slab(index, arena, segment);
            insert(slab);
            mapped++;
            if (liveCount == live.length) {
                live = Arrays.copyOf(live, 2 * live.length);
            }
            live[liveCount++] = slab;
            return slab;
        } catch (IOException | RuntimeException e) {
            arena.close();
            refusal = "cannot map slab " + index + " of process " + pid + ": " + e.getMessage();
            return null;
        }
    }

    /** Unmaps the slabs no delivered message uses; they are mapped again when named. */
    private void unmapIdle() {
        Slab[] kept = values;
        keys = new int[keys.length];
        values = new Slab[values.length];
        mapped = 0;
        for (Slab slab : kept) {
            if (slab == null) {
                continue;
            }
            if (slab.inUse == 0) {
                unmap(slab);
            } else {
                insert(slab);
                mapped++;
            }
        }
        compactLive();
    }

    private void compactLive() {
        int n = 0;
        for (int i = 0; i < liveCount; i++) {
            if (!live[i].unmapped) {
                live[n++] = live[i];
            }
        }
        Arrays.fill(live, n, liveCount, null);
        liveCount = n;
    }

    /**
     * The peer is gone: idle slabs are unmapped now, the others when their last message is
     * released or {@link #expire} finds the grace over. Token holder.
     */
    void close(long now) {
        if (closed) {
            return;
        }
        closed = true;
        closedAtNanos = now;
        for (int i = 0; i < liveCount; i++) {
            Slab slab = live[i];
            slab.retired = true;
            if (slab.inUse == 0) {
                unmap(slab);
            }
        }
        compactLive();
        Arrays.fill(values, null);
        mapped = 0;
    }

    /**
     * After a gone peer's grace, unmaps what messages still held use, if the peer's process still
     * runs (it may reuse its buffers: the views throw from then on); a dead process's memory cannot
     * change, and its messages stay readable until released. Whether all is unmapped.
     */
    boolean expire(long now) {
        compactLive();
        if (liveCount > 0 && now - closedAtNanos >= RETIRED_GRACE_NANOS
                && ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
            closeAll();
        }
        return liveCount == 0;
    }

    /** Unmaps every slab, also those a message not yet released still uses (the transport closes, or the grace ended). */
    void closeAll() {
        closed = true;
        for (int i = 0; i < liveCount; i++) {
            unmap(live[i]);
        }
        compactLive();
        Arrays.fill(values, null);
        mapped = 0;
    }

    private static void unmap(Slab slab) {
        if (!slab.unmapped) {
            try {
                slab.arena.close();
                slab.unmapped = true;
            } catch (IllegalStateException e) {
                // A view is in use by a native call or an I/O operation right now: left for later.
                LOG.log(System.Logger.Level.DEBUG, "slab " + slab.index + " still in use, not unmapped: " + e.getMessage());
            }
        }
    }
}
