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
        permits Fabric, Domain, EventQueue, CompletionQueue, AddressVector, MemoryRegion, Endpoint, PassiveEndpoint {

    static final LongAdder OPENED = new LongAdder();
    static final LongAdder CLOSED = new LongAdder();

    /** The {@code struct fid *}. */
    final long fid;
    private final FabricObject parent;
    private final List<FabricObject> children = new ArrayList<>();
    private boolean closed;

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

    /** Whether {@link #close()} has run. */
    public final boolean isClosed() {
        synchronized (children) {
            return closed;
        }
    }

    /** Closes the objects opened from this one, then this one. Idempotent. */
    @Override
    public final void close() {
        List<FabricObject> open;
        synchronized (children) {
            if (closed) {
                return;
            }
            closed = true;
            open = new ArrayList<>(children);
            children.clear();
        }
        // Newest first, and by kind: whatever may be bound to another object goes before it
        // (endpoints before the memory, queues and vectors they use; the domain's tree before the
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
            long ops = LibFabric.word(fid, InfoDescriptor.FID_OPS);
            int rc = (int) LibFabric.I_J.invokeExact(LibFabric.function(ops, InfoDescriptor.OPS_CLOSE), fid);
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

    private int closeRank() {
        return switch (this) {
            case Endpoint e -> 0;
            case PassiveEndpoint p -> 0;
            case MemoryRegion m -> 1;
            case AddressVector a -> 2;
            case CompletionQueue c -> 3;
            case Domain d -> 4;
            case EventQueue q -> 5;
            case Fabric f -> 6;
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
            LibFabric.check(rc, what);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
