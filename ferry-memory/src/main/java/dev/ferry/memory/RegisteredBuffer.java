package dev.ferry.memory;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A reference-counted piece of registered memory from a {@link RegisteredAllocator}: a
 * {@link MemorySegment} view to encode into or decode from, the local descriptor for libfabric
 * data calls, and the address and key a peer uses to reach it by RDMA.
 *
 * <p>A buffer starts with one reference; {@link #release()} to zero returns it to its pool.
 * Slices share the reference count of the buffer they were cut from.
 *
 * <p><b>Reuse.</b> Buffer objects are pooled: the object released now may be handed out again by
 * a later allocation, so a stale reference cannot always be told from the new owner's. The state
 * word packs a generation (bumped by each allocation) with the count:
 * <pre>
 *  63                              32 31                               0
 * +----------------------------------+----------------------------------+
 * |  generation                      |  reference count                 |
 * +----------------------------------+----------------------------------+
 * </pre>
 * Every method checks it: after release, any use throws {@link IllegalStateException} naming
 * the buffer, until the object is handed out again. A slice remembers the generation it was cut
 * in and compares it in the same atomic operation as its count update, so a stale slice is
 * caught even after its buffer was reused. Under {@link LeakDetection#PARANOID} buffer objects
 * are never reused, so every use after release and every double release is caught.
 *
 * <p>The segment is valid only while the buffer is held; accesses through a segment kept past
 * release are not checked (the memory belongs to the next owner).
 */
public final class RegisteredBuffer {

    private static final VarHandle STATE;

    static {
        try {
            STATE = MethodHandles.lookup().findVarHandle(RegisteredBuffer.class, "state", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final long ONE = 1L;
    private static final long GENERATION_ONE = 1L << 32;

    // Root state: a view delegates all of this to its root.
    /** The pool of the current allocation. */
    PoolArena pool;
    /** The run of a size-class buffer; null for a large one. */
    final Run run;
    /** The registration cache entry of a large buffer; null for a size-class one. */
    final CachedRegistration entry;
    final LeakDetector.Sentinel sentinel;
    @SuppressWarnings("unused") // accessed through STATE
    private long state;

    // Shared by roots and views.
    private final RegisteredBuffer root;
    /** The root's generation when this view was cut (unused for roots). */
    private final int generation;
    private final MemorySegment segment;
    private final MemoryRegistrar.Registration registration;
    private final long descriptor;
    private final long key;
    /** Offset of {@link #segment} inside the registered memory. */
    private final long registeredOffset;

    /** A size-class buffer bound to its slot. */
    RegisteredBuffer(PoolArena pool, Run run, MemorySegment segment, MemoryRegistrar.Registration registration,
                     long descriptor, long key, long registeredOffset, LeakDetector detector) {
        this.pool = pool;
        this.run = run;
        this.entry = null;
        this.root = this;
        this.generation = 0;
        this.segment = segment;
        this.registration = registration;
        this.descriptor = descriptor;
        this.key = key;
        this.registeredOffset = registeredOffset;
        this.sentinel = detector.track(this, "slab " + run.slab.index + " +0x" + Long.toHexString(registeredOffset),
                pool.kind, segment.byteSize());
    }

    /** A large buffer owning a whole registration cache entry. */
    RegisteredBuffer(CachedRegistration entry, LeakDetector detector) {
        this.pool = null;
        this.run = null;
        this.entry = entry;
        this.root = this;
        this.generation = 0;
        this.segment = entry.segment();
        this.registration = entry.registration;
        this.descriptor = entry.descriptor();
        this.key = entry.key();
        this.registeredOffset = 0;
        this.sentinel = detector.track(this, "large @0x" + Long.toHexString(segment.address()), null,
                segment.byteSize());
    }

    /** A fresh object for the same slot, continuing the generation (PARANOID reuse). */
    private RegisteredBuffer(RegisteredBuffer released, LeakDetector detector) {
        this.pool = released.pool;
        this.run = released.run;
        this.entry = released.entry;
        this.root = this;
        this.generation = 0;
        this.segment = released.segment;
        this.registration = released.registration;
        this.descriptor = released.descriptor;
        this.key = released.key;
        this.registeredOffset = released.registeredOffset;
        STATE.set(this, (long) STATE.get(released) & ~0xFFFF_FFFFL);
        this.sentinel = detector.track(this, released.sentinel == null ? "?" : released.sentinel.slot,
                released.sentinel == null ? null : released.sentinel.pool, segment.byteSize());
    }

    /** A view of part of {@code parent}. */
    private RegisteredBuffer(RegisteredBuffer root, int generation, MemorySegment segment,
                             MemoryRegistrar.Registration registration, long descriptor, long key,
                             long registeredOffset) {
        this.pool = null;
        this.run = null;
        this.entry = null;
        this.sentinel = null;
        this.root = root;
        this.generation = generation;
        this.segment = segment;
        this.registration = registration;
        this.descriptor = descriptor;
        this.key = key;
        this.registeredOffset = registeredOffset;
    }

    /**
     * The memory of this buffer: its whole capacity, at least the size that was asked for. Slice
     * it to the length used ({@code segment().asSlice(0, length)} or {@link #slice}).
     */
    public MemorySegment segment() {
        checkHeld("segment");
        return segment;
    }

    /** Bytes in {@link #segment()}. */
    public long capacity() {
        return segment.byteSize();
    }

    /** The local descriptor to pass with libfabric data calls on this memory. */
    public long descriptor() {
        checkHeld("descriptor");
        return descriptor;
    }

    /** The key a peer presents to read or write this buffer remotely. */
    public long key() {
        checkHeld("key");
        return key;
    }

    /** The address a peer names to reach the first byte of this buffer. */
    public long remoteAddress() {
        return remoteAddress(0);
    }

    /** The address a peer names to reach the byte at {@code offset} into this buffer. */
    public long remoteAddress(long offset) {
        checkHeld("remoteAddress");
        return registration.remoteAddress(registeredOffset + offset);
    }

    /**
     * The descriptor of the {@link SharedMemory} file that holds this buffer, which a peer on this
     * host may map, or -1 where the buffer's memory is private (not a shared pool's slab).
     */
    public int sharedFd() {
        checkHeld("sharedFd");
        Run r = root.run;
        return r == null || r.slab.shared == null ? -1 : r.slab.shared.fd();
    }

    /** The index of the slab that holds this buffer ({@link RegisteredAllocator#sharedName}), or -1 if none does. */
    public int slabIndex() {
        Run r = root.run;
        return r == null ? -1 : r.slab.index;
    }

    /** Where this buffer's first byte lies in its slab, or -1 if no slab holds it. */
    public long slabOffset() {
        Run r = root.run;
        return r == null ? -1 : segment.address() - r.slab.segment.address();
    }

    /** The pool this buffer belongs to. */
    public PoolKind pool() {
        checkHeld("pool");
        return root.pool.kind;
    }

    /** The current reference count; 0 once released (for a slice: once its buffer is released). */
    public int refCnt() {
        long s = (long) STATE.getVolatile(root);
        if (root != this && (int) (s >>> 32) != generation) {
            return 0;
        }
        return Math.max(0, (int) s);
    }

    /**
     * A view of {@code length} bytes at {@code offset}, sharing this buffer's reference count
     * (no reference is added: release the buffer or the view, not both). For handing part of a
     * received buffer to the application without copying.
     */
    public RegisteredBuffer slice(long offset, long length) {
        checkHeld("slice");
        int rootGeneration = (int) ((long) STATE.getVolatile(root) >>> 32);
        return new RegisteredBuffer(root, rootGeneration, segment.asSlice(offset, length), registration,
                descriptor, key, registeredOffset + offset);
    }

    /** {@link #slice} and {@link #retain()}: the view holds a reference of its own. */
    public RegisteredBuffer retainedSlice(long offset, long length) {
        RegisteredBuffer view = slice(offset, length);
        view.retain();
        return view;
    }

    /** Adds a reference. */
    public RegisteredBuffer retain() {
        RegisteredBuffer r = root;
        long s = (long) STATE.getVolatile(r);
        for (;;) {
            if ((int) s <= 0 || (r != this && (int) (s >>> 32) != generation)) {
                throw released("retain");
            }
            if ((int) s == Integer.MAX_VALUE) {
                throw new IllegalStateException(this + ": reference count overflow");
            }
            long witness = (long) STATE.compareAndExchange(r, s, s + ONE);
            if (witness == s) {
                return this;
            }
            s = witness;
        }
    }

    /**
     * Drops a reference; the last one returns the buffer to its pool.
     *
     * @return whether this call released the buffer
     * @throws IllegalStateException if the buffer was already released
     */
    public boolean release() {
        RegisteredBuffer r = root;
        long s = (long) STATE.getVolatile(r);
        for (;;) {
            if ((int) s <= 0 || (r != this && (int) (s >>> 32) != generation)) {
                throw released("release");
            }
            long witness = (long) STATE.compareAndExchange(r, s, s - ONE);
            if (witness == s) {
                break;
            }
            s = witness;
        }
        if ((int) s == 1) {
            r.pool.allocator.free(r);
            return true;
        }
        return false;
    }

    /** Marks a root handed out by an allocation: next generation, one reference. */
    void allocated() {
        long s = (long) STATE.get(this);
        STATE.setRelease(this, (s & 0xFFFF_FFFF_0000_0000L) + GENERATION_ONE + ONE);
    }

    /** The object to put back in the pool after this one was released. */
    RegisteredBuffer successor(LeakDetector detector) {
        if (detector.level != LeakDetection.PARANOID) {
            return this;
        }
        detector.forget(this);
        return new RegisteredBuffer(this, detector);
    }

    private void checkHeld(String operation) {
        RegisteredBuffer r = root;
        long s = (long) STATE.getVolatile(r);
        if ((int) s <= 0 || (r != this && (int) (s >>> 32) != generation)) {
            throw released(operation);
        }
    }

    private IllegalStateException released(String operation) {
        return new IllegalStateException(this + ": " + operation + " after release"
                + " (double release or use after release)");
    }

    @Override
    public String toString() {
        RegisteredBuffer r = root;
        long s = (long) STATE.getVolatile(r);
        String where = r.run != null
                ? "slab " + r.run.slab.index + " +0x" + Long.toHexString(registeredOffset)
                : "large @0x" + Long.toHexString(segment.address());
        PoolArena p = r.pool;
        return "RegisteredBuffer[" + (p == null ? "?" : p.kind) + " " + segment.byteSize() + " B " + where
                + (r == this ? "" : " slice") + " gen " + (r == this ? (int) (s >>> 32) : generation)
                + " refCnt " + refCnt() + "]";
    }
}
