package dev.ferry.ps;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A dense tensor on this server: {@link DenseConfig#length()} f32 weights and their optimizer
 * state in one off-heap row ({@link RowLayout}). A push is one optimizer step on the whole
 * tensor; reads may take any range. Reads and steps hold one lock, so a read never sees half
 * a step.
 */
public final class DenseTensor {

    private final DenseConfig config;
    private final PsConfig limits;
    private final boolean readOnly;
    private final OptimizerKernel kernel;
    private final ReentrantLock lock = new ReentrantLock();
    private final Arena arena = Arena.ofShared();
    private final MemorySegment row;
    private boolean closed;
    /** Told of every step and merge, under the lock after the row holds it ({@link #onChange}); null: nobody. */
    private volatile Runnable changes;

    DenseTensor(DenseConfig config, PsConfig limits, boolean readOnly) {
        this.config = config;
        this.limits = limits;
        this.readOnly = readOnly;
        this.kernel = new OptimizerKernel(config.optimizer(), config.initializer());
        this.row = arena.allocate(config.bytes(), Long.BYTES);
        kernel.initRow(row, 0, 0, config.length());
    }

    /** Its configuration. */
    public DenseConfig config() {
        return config;
    }

    /** Its name. */
    public String name() {
        return config.name();
    }

    /** Optimizer steps applied so far. */
    public long steps() {
        lock.lock();
        try {
            checkOpen();
            return row.get(RowLayout.LONG, RowLayout.STEPS_OFFSET);
        } finally {
            lock.unlock();
        }
    }

    /** A snapshot of its size and memory. */
    public TableStats stats() {
        return new TableStats(name(), config.length(), config.optimizer(), 1, 1, config.bytes(), config.bytes());
    }

    /**
     * Writes weights {@code [offset, offset + count)} to the start of {@code out} as
     * little-endian f32.
     *
     * @throws PsException {@code INVALID_ARGUMENT} for a range outside the tensor or a read-only
     *                     {@code out}; {@code LENGTH_MISMATCH} if {@code out} is too short;
     *                     {@code REQUEST_TOO_LARGE} past {@link PsConfig#maxRequestBytes()}
     */
    public void read(int offset, int count, MemorySegment out) {
        Objects.requireNonNull(out, "out");
        if (offset < 0 || count < 0 || offset > config.length() - count) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "range [" + offset + ", +" + count
                    + ") is outside tensor '" + name() + "' of length " + config.length());
        }
        long bytes = (long) count * Float.BYTES;
        checkSize(bytes);
        if (out.isReadOnly()) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the output segment is read-only");
        }
        if (out.byteSize() < bytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH,
                    "the output holds " + out.byteSize() + " bytes; " + count + " weights need " + bytes);
        }
        lock.lock();
        try {
            checkOpen();
            MemorySegment.copy(row, RowLayout.weight(offset), out, 0, bytes);
        } finally {
            lock.unlock();
        }
    }

    /**
     * One optimizer step with {@code gradients}: exactly {@code length} little-endian f32 values.
     *
     * @throws PsException {@code READ_ONLY} in serving mode; {@code LENGTH_MISMATCH} for another
     *                     length; {@code INVALID_ARGUMENT} for a NaN or infinite gradient;
     *                     {@code REQUEST_TOO_LARGE} past {@link PsConfig#maxRequestBytes()}. The
     *                     tensor is unchanged then
     */
    public void apply(MemorySegment gradients) {
        Objects.requireNonNull(gradients, "gradients");
        if (readOnly) {
            throw new PsException(PsException.Code.READ_ONLY,
                    "tensor '" + name() + "' is served read-only: pushes are rejected");
        }
        long bytes = (long) config.length() * Float.BYTES;
        if (gradients.byteSize() != bytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "tensor '" + name() + "' has " + config.length()
                    + " weights and takes " + bytes + " bytes of gradients, not " + gradients.byteSize());
        }
        checkSize(bytes);
        long bad = Kernels.firstNonFinite(gradients, 0, bytes);
        if (bad >= 0) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "gradient "
                    + gradients.get(RowLayout.FLOAT, bad * Float.BYTES) + " (element " + bad + ") of tensor '"
                    + name() + "' is not finite");
        }
        lock.lock();
        try {
            checkOpen();
            kernel.step(row, 0, config.length(), gradients, 0);
            changed();
        } finally {
            lock.unlock();
        }
    }

    /** The whole row (header, weights, state) as bytes; for tests. */
    byte[] rawRow() {
        return snapshot(Arena.ofAuto()).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
    }

    /** A consistent copy of the row. */
    MemorySegment snapshot(Arena into) {
        lock.lock();
        try {
            checkOpen();
            MemorySegment copy = into.allocate(row.byteSize(), Long.BYTES);
            MemorySegment.copy(row, 0, copy, 0, row.byteSize());
            return copy;
        } finally {
            lock.unlock();
        }
    }

    /** Copies the whole row (header, weights, state: {@link DenseConfig#bytes()}) to {@code out}, consistently. */
    void copyRow(MemorySegment out) {
        lock.lock();
        try {
            checkOpen();
            MemorySegment.copy(row, 0, out, 0, row.byteSize());
        } finally {
            lock.unlock();
        }
    }

    /**
     * Replaces the row with {@code data}, a whole row of another copy of this tensor, if
     * {@code always} or if it has at least as many steps (the row's version); returns whether it
     * did. The check and the copy are one step under the lock.
     */
    boolean mergeRow(MemorySegment data, boolean always) {
        if (data.byteSize() != row.byteSize()) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "a row of " + data.byteSize() + " bytes for tensor '"
                    + name() + "', whose rows take " + row.byteSize());
        }
        lock.lock();
        try {
            checkOpen();
            if (!always && data.get(RowLayout.LONG, RowLayout.STEPS_OFFSET) < row.get(RowLayout.LONG,
                    RowLayout.STEPS_OFFSET)) {
                return false;
            }
            MemorySegment.copy(data, 0, row, 0, row.byteSize());
            changed();
            return true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Tells {@code listener} (null: nobody) of every step and merge from now on, on the writing
     * thread under the tensor's lock, once the row holds the new values. One listener per tensor.
     */
    public void onChange(Runnable listener) {
        this.changes = listener;
    }

    private void changed() {
        Runnable listener = changes;
        if (listener != null) {
            listener.run();
        }
    }

    /** Replaces the row with checkpointed bytes. */
    void load(MemorySegment data, String source) {
        if (data.byteSize() != row.byteSize()) {
            throw SparseTable.corrupt(source, data.byteSize() + " bytes; tensor '" + name() + "' takes " + row.byteSize());
        }
        lock.lock();
        try {
            MemorySegment.copy(data, 0, row, 0, row.byteSize());
        } finally {
            lock.unlock();
        }
    }

    void close() {
        lock.lock();
        try {
            if (!closed) {
                closed = true;
                arena.close();
            }
        } finally {
            lock.unlock();
        }
    }

    private void checkSize(long bytes) {
        if (bytes > limits.maxRequestBytes()) {
            throw new PsException(PsException.Code.REQUEST_TOO_LARGE, "a request of " + bytes + " bytes to tensor '"
                    + name() + "' exceeds the limit of " + limits.maxRequestBytes() + " bytes");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new PsException(PsException.Code.CLOSED, "tensor '" + name() + "' is closed");
        }
    }
}
