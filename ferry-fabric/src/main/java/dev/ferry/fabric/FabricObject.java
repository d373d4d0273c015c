package dev.ferry.fabric;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.LongAdder;

/**
 * A native libfabric object ({@code struct fid}). Closing it first closes the objects opened
 * from it, newest first, so native objects are always torn down in a valid order, each exactly
 * once.
 */
public abstract sealed class FabricObject implements AutoCloseable
        permits Fabric, Domain, EventQueue, CompletionQueue, AddressVector, MemoryRegion, Endpoint, PassiveEndpoint,
        SharedReceiveContext {

    static final LongAdder OPENED = new LongAdder();
    static final LongAdder CLOSED = new LongAdder();

    /** The {@code struct fid *}. */
    final long fid;
    private final FabricObject parent;
    private final List<FabricObject> children = new ArrayList<>();
    /**
     * Held while this object opens a child and for the whole of its close: a child cannot be
     * opened from an object being closed, and a parent's close waits for a child's close that
     * another thread started (the provider frees the parent, and a child's close reads it).
     */
    private final Object lifecycle = new Object();
    private volatile boolean closed;

    FabricObject(long fid, FabricObject parent) {
        this.fid = fid;
        this.parent = parent;
        OPENED.increment();
        if (parent != null) {
            synchronized (parent.children) {
                parent.children.add(this);
            }
        }
    }

    /** Native objects opened and not yet closed in this process (info lists included). */
    public static long liveObjects() {
        return OPENED.sum() - CLOSED.sum();
    }

    /** Whether {@link #close()} has started. */
    public final boolean isClosed() {
        return closed;
    }

    /**
     * Opens a child of this object with {@code opener} (the native open and the Java object),
     * under this object's lifecycle lock.
     *
     * @throws IllegalStateException if this object is closed or being closed
     */
    final <T extends FabricObject> T openChild(java.util.function.Supplier<T> opener) {
        synchronized (lifecycle) {
            ensureOpen();
            return opener.get();
        }
    }

    /**
     * Closes the objects opened from this one, then this one. Idempotent and thread-safe: a
     * second caller returns once the first has finished, so a parent is never closed under a
     * child that another thread is still closing. The caller must make sure no other thread
     * uses the object (posts, polls) while it closes.
     */
    @Override
    public final void close() {
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            closed = true;
            closeNow();
        }
    }

    private void closeNow() {
        List<FabricObject> open;
        synchronized (children) {
            open = new ArrayList<>(children);
            children.clear();
        }
        // Newest first, and by kind: whatever may be bound to another object goes before it
        // (endpoints before the shared receive contexts, memory, queues and vectors they use, and a
        // context before the memory its receives point into; the domain's tree before the
        // event queue its endpoints reported to).
        java.util.Collections.reverse(open);
        open.sort(java.util.Comparator.comparingInt(FabricObject::closeRank));
        RuntimeException failure = null;
        for (int i = 0; i < open.size(); i++) {
            try {
                open.get(i).close();
            } catch (RuntimeException e) {
                failure = failure == null ? e : failure;
            }
        }
        try {
            beforeClose();
            if (TRACE) {
                System.err.printf("ferry-fabric: fi_close(%s 0x%x) on %s%n", getClass().getSimpleName(), fid,
                        Thread.currentThread().getName());
            }
            long ops = LibFabric.word(fid, InfoDescriptor.FID_OPS);
            int rc = (int) LibFabric.I_J.invokeExact(LibFabric.function(ops, InfoDescriptor.OPS_CLOSE), fid);
            if (!(this instanceof MemoryRegion)) { // closed once per rendezvous transfer; installs nothing
                SignalGuard.restore();
            }
            LibFabric.check(rc, "fi_close(" + getClass().getSimpleName() + ")");
        } catch (Throwable t) {
            failure = failure == null ? LibFabric.rethrow(t) : failure;
        } finally {
            CLOSED.increment();
            if (parent != null) {
                synchronized (parent.children) {
                    parent.children.remove(this);
                }
            }
            afterClose();
        }
        if (failure != null) {
            throw failure;
        }
    }

    /** {@code -Dferry.fabric.traceClose=true}: every native close is named on stderr first. */
    private static final boolean TRACE = Boolean.getBoolean("ferry.fabric.traceClose");

    private int closeRank() {
        return switch (this) {
            case Endpoint e -> 0;
            case PassiveEndpoint p -> 0;
            case SharedReceiveContext s -> 1;
            case MemoryRegion m -> 2;
            case AddressVector a -> 3;
            case CompletionQueue c -> 4;
            case Domain d -> 5;
            case EventQueue q -> 6;
            case Fabric f -> 7;
        };
    }

    /** Hook before the native close. */
    void beforeClose() {
    }

    /** Hook after the native close, for memory the object owned. */
    void afterClose() {
    }

    final void ensureOpen() {
        if (isClosed()) {
            throw new IllegalStateException(getClass().getSimpleName() + " is closed");
        }
    }

    /** {@code fi_control(fid, command, arg)}. */
    final void control(int command, long arg, String what) {
        try {
            long ops = LibFabric.word(fid, InfoDescriptor.FID_OPS);
            int rc = (int) LibFabric.I_JIJ.invokeExact(LibFabric.function(ops, InfoDescriptor.OPS_CONTROL), fid,
                    command, arg);
            if (!(this instanceof MemoryRegion)) { // fi_enable of an shm endpoint creates its region
                SignalGuard.restore();
            }
            LibFabric.check(rc, what);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** {@code fi_bind(fid, other, flags)}. */
    final void bindTo(FabricObject other, long flags, String what) {
        try {
            long ops = LibFabric.word(fid, InfoDescriptor.FID_OPS);
            int rc = (int) LibFabric.I_JJJ.invokeExact(LibFabric.function(ops, InfoDescriptor.OPS_BIND), fid,
                    other.fid, flags);
            if (!(this instanceof MemoryRegion)) {
                SignalGuard.restore();
            }
            LibFabric.check(rc, what);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
