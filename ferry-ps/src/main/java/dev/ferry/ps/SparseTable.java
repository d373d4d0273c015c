package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * A sparse embedding table on this server: int64 id to {@code dimension} f32 weights and their
 * optimizer state (stored apart, {@link StoredRow}), in {@link TableConfig#shards()} lock stripes. Rows live off-heap and
 * are created by their first pull or push with the table's {@link Initializer}.
 *
 * <p>Neither method allocates in steady state: their working arrays are per thread
 * ({@link Scratch}).
 *
 * <p>Buffers: {@link #gather} writes rows into a caller's segment (the registered response
 * buffer) and {@link #apply} reads gradients from one (the registered request buffer); both hold
 * rows of {@code dimension} little-endian f32 values, back to back, in the order of the ids.
 *
 * <p>Thread safety and what readers see: any number of threads may gather and apply at once.
 * Each row is updated under the lock of its shard. A gather reads rows without the locks, as a
 * seqlock ({@link Shard}): it reads a row again when a write to its shard raced with the read,
 * and takes the lock for a row it must create or that keeps changing; so a gather sees every
 * row whole, between two optimizer steps, never a torn row. A batch is not atomic across rows: a gather
 * concurrent with an apply may see some rows of that apply updated and others not yet. Updates
 * to one row are serialised, so concurrent pushes give the state of some serial order of their
 * per-row steps (for SGD, the same sums in any order, to rounding).
 *
 * <p>Roles: this class keeps the shards and checks the pull ({@link #gather}) and push
 * ({@link #apply}) requests; a pull's reads without the locks are {@link OptimisticGather}'s, a
 * push's steps {@link PushSteps}', which ids get a row is
 * {@link RowAdmission}'s, whole rows in and out (checkpoints, moves, replication, export) are
 * {@link WholeRows}'.
 *
 * <p>Eviction ({@link Eviction}): rows are deleted in the background by the table's
 * {@link TableEvictor}, in small steps under the same shard locks, as writes for the optimistic
 * readers; a deleted id is again like a never-seen one. Each row's last update (creation or
 * step) is stamped with the table's clock, read once per push batch.
 */
public final class SparseTable {

    private final TableConfig config;
    private final PsConfig limits;
    private final boolean readOnly;
    private final OptimizerKernel kernel;
    private final Shard[] shards;
    private final long payloadBytes;
    private final long rowBytes;
    /** Which ids get a row, and the row count. */
    private final RowAdmission admission;
    private final WholeRows wholeRows;
    /** The reads of a pull. */
    private final OptimisticGather gathers;
    /** The steps of a push. */
    private final PushSteps steps;
    private final LongAdder evictedTtl = new LongAdder();
    private final LongAdder evictedCapacity = new LongAdder();
    /** Push steps dropped because the evictor deleted their row between the two phases of the push. */
    private final LongAdder lostToEviction = new LongAdder();
    private final LongSupplier clock;
    /** Deletes rows per {@link TableConfig#eviction()}; null when there is none, or the table is read-only. */
    private final TableEvictor evictor;
    private volatile boolean closed;
    /** Told of every row a push or a merge changed ({@link #onChange}); null: nobody listens. */
    private volatile RowListener changes;

    SparseTable(TableConfig config, PsConfig limits, boolean readOnly) {
        this(config, limits, readOnly, System::nanoTime);
    }

    /** With {@code clock} (nanoseconds) for the last-update stamps and the TTL: tests inject one. */
    SparseTable(TableConfig config, PsConfig limits, boolean readOnly, LongSupplier clock) {
        this.clock = Objects.requireNonNull(clock, "clock");
        this.config = config;
        this.limits = limits;
        this.readOnly = readOnly;
        this.kernel = new OptimizerKernel(config.optimizer(), config.initializer());
        this.payloadBytes = (long) config.dimension() * Float.BYTES;
        this.rowBytes = RowLayout.rowBytes(config.dimension(), config.optimizer().stateSlots());
        this.shards = new Shard[config.shards()];
        for (int s = 0; s < shards.length; s++) {
            shards[s] = new Shard(config.dimension(), config.optimizer().stateSlots());
        }
        this.admission = new RowAdmission(config, kernel, shards);
        this.wholeRows = new WholeRows(this, shards, rowBytes, admission);
        this.gathers = new OptimisticGather(this, shards, kernel, admission, readOnly);
        this.steps = new PushSteps(this, shards, kernel, admission, lostToEviction);
        Eviction eviction = config.eviction();
        this.evictor = eviction.enabled() && !readOnly ? new TableEvictor(this) : null;
    }

    /** Its evictor (run by the server's evictor thread, or by a test), or null if it deletes no rows. */
    TableEvictor evictor() {
        return evictor;
    }

    /** The table's clock, in nanoseconds. */
    long now() {
        return clock.getAsLong();
    }

    /** Push steps dropped because their row was evicted while the push ran; for tests. */
    long lostToEviction() {
        return lostToEviction.sum();
    }

    /** Shard {@code s}; the evictor works on it under its lock. */
    Shard shard(int s) {
        return shards[s];
    }

    /** Accounts for {@code n} rows the evictor deleted, for their TTL or for the capacity. */
    void evicted(int n, boolean ttl) {
        admission.removed(n);
        (ttl ? evictedTtl : evictedCapacity).add(n);
    }

    /** Under the shard's lock, after the evictor deleted the row of {@code id}: tells the listener. */
    void removed(long id, long steps) {
        RowListener listener = changes;
        if (listener != null) {
            listener.removed(id, steps);
        }
    }

    /** The shard's lock must be held; throws {@code CLOSED} if the table was closed. */
    void checkOpenLocked(Shard shard) {
        checkOpen(shard);
    }

    /**
     * What the table's {@link Admission} rule did since it was created.
     *
     * @param admitted    rows created by a pull or push (every new row under {@link Admission#always()})
     * @param rejected    sightings of ids not stored: pulls answered with initial values, pushes dropped
     * @param filterBytes memory of the rule's counters, at most {@link Admission#filterBytes()}
     */
    public record AdmissionStats(long admitted, long rejected, long filterBytes) {
    }

    /** A snapshot of the admission counters. */
    public AdmissionStats admissionStats() {
        return admission.stats();
    }

    /** Shard {@code s}'s gate; for tests. */
    AdmissionGate gate(int s) {
        return admission.gate(s);
    }

    /** Its configuration. */
    public TableConfig config() {
        return config;
    }

    /** Its name. */
    public String name() {
        return config.name();
    }

    /** Weights per row. */
    public int dimension() {
        return config.dimension();
    }

    /** Whether pushes are rejected (serving mode). */
    public boolean readOnly() {
        return readOnly;
    }

    /** Rows stored. */
    public long rows() {
        return admission.rows();
    }

    /** A snapshot of its size and memory. */
    public TableStats stats() {
        long reserved = 0;
        for (Shard shard : shards) {
            shard.lock.lock();
            try {
                reserved += shard.reservedBytes();
            } finally {
                shard.lock.unlock();
            }
        }
        return new TableStats(name(), dimension(), config.optimizer(), admission.rows(), config.maxRows(),
                rowBytes, reserved, admission.admitted(), admission.rejected(), admission.refusedFull(),
                evictedTtl.sum(), evictedCapacity.sum());
    }

    /**
     * Writes the weights of {@code ids[offset, offset + count)} to {@code out}, row {@code i} at
     * byte {@code i * dimension * 4}, in the ids' order (duplicates repeat the row). Ids not in
     * the table are created with their initial values; in serving mode, and while the table's
     * {@link Admission} rule has not admitted them, they are not stored, and their initial values
     * are written.
     *
     * @throws PsException        {@code INVALID_ARGUMENT} for a range outside {@code ids} or a
     *                            read-only {@code out}; {@code LENGTH_MISMATCH} if {@code out} is
     *                            shorter than {@code count} rows; {@code REQUEST_TOO_LARGE} past
     *                            the {@link PsConfig} limits; nothing is read or created then
     * @throws TableFullException if a new row was needed beyond the capacity; rows before it
     *                            were created and written
     */
    public void gather(long[] ids, int offset, int count, MemorySegment out) {
        Objects.requireNonNull(out, "out");
        long bytes = checkRequest(ids, offset, count);
        if (out.isReadOnly()) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "the output segment is read-only");
        }
        if (out.byteSize() < bytes) {
            throw new PsException(PsException.Code.LENGTH_MISMATCH, "the output holds " + out.byteSize()
                    + " bytes; " + count + " rows of table '" + name() + "' (dimension " + dimension()
                    + ") need " + bytes);
        }
        gathers.gather(ids, offset, count, out);
    }

    /**
     * Applies one optimizer step per id of {@code ids[offset, offset + count)} with the gradient
     * row at byte {@code i * dimension * 4} of {@code gradients}, which must hold exactly
     * {@code count} rows. Ids not in the table are created first with their initial values, if the
     * table's {@link Admission} rule admits them; the gradients of the others are dropped.
     *
     * <p>Duplicate ids are applied sequentially, one step each, in the order of the batch (use
     * {@link BatchPlan#sumGradients} on the client for one summed step per id).
     *
     * @throws PsException        {@code READ_ONLY} in serving mode; {@code INVALID_ARGUMENT} for a
     *                            range outside {@code ids} or a gradient that is NaN or infinite;
     *                            {@code WRONG_DIMENSION} or {@code LENGTH_MISMATCH} if the gradients
     *                            are not {@code count} rows of this table; {@code REQUEST_TOO_LARGE}
     *                            past the {@link PsConfig} limits. The table is unchanged then
     * @throws TableFullException if a new row was needed beyond the capacity. No gradient was
     *                            applied; rows created before it keep their initial values
     */
    public void apply(long[] ids, int offset, int count, MemorySegment gradients) {
        Objects.requireNonNull(gradients, "gradients");
        if (readOnly) {
            throw new PsException(PsException.Code.READ_ONLY,
                    "table '" + name() + "' is served read-only: pushes are rejected");
        }
        long bytes = checkRequest(ids, offset, count);
        if (gradients.byteSize() != bytes) {
            if (count > 0 && gradients.byteSize() > 0 && gradients.byteSize() % ((long) count * Float.BYTES) == 0) {
                throw new PsException(PsException.Code.WRONG_DIMENSION, "gradients hold "
                        + gradients.byteSize() / count / Float.BYTES + " floats per id; table '" + name()
                        + "' has dimension " + dimension());
            }
            throw new PsException(PsException.Code.LENGTH_MISMATCH, count + " ids of table '" + name()
                    + "' (dimension " + dimension() + ") need " + bytes + " bytes of gradients, not "
                    + gradients.byteSize());
        }
        long bad = Kernels.firstNonFinite(gradients, 0, bytes);
        if (bad >= 0) {
            float g = gradients.get(RowLayout.FLOAT, bad * Float.BYTES);
            long pos = bad / dimension();
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "gradient " + g + " for id "
                    + ids[offset + (int) pos] + " (element " + bad % dimension() + ") of table '" + name()
                    + "' is not finite");
        }
        steps.apply(ids, offset, count, gradients);
    }

    /** The whole row of {@code id} (header, weights, optimizer state) as bytes, or null; for tests. */
    byte[] rawRow(long id) {
        return wholeRows.raw(id);
    }

    /** Whole rows in and out: checkpoints, moves, replication, export. */
    WholeRows wholeRows() {
        return wholeRows;
    }

    /** The listener of changed rows, or null. */
    RowListener listener() {
        return changes;
    }

    int shardCount() {
        return shards.length;
    }

    long rowBytes() {
        return rowBytes;
    }

    /**
     * Tells {@code listener} (null: nobody) of every row changed from now on: after each
     * optimizer step of a push and each row a merge wrote, on the writing thread, under the
     * row's shard lock, once the row holds the new values. One listener per table.
     */
    public void onChange(RowListener listener) {
        this.changes = listener;
    }

    /** Frees the table's memory; later calls fail with {@code CLOSED}. */
    void close() {
        closed = true;
        for (Shard shard : shards) {
            shard.lock.lock();
            try {
                shard.beginWrite();
                shard.close();
            } finally {
                shard.lock.unlock();
            }
        }
    }

    static PsException corrupt(String source, String message) {
        return new PsException(PsException.Code.CHECKPOINT_CORRUPT, "corrupt checkpoint: " + source + ": " + message);
    }

    /** Validates a request's range and size; returns its payload bytes. */
    private long checkRequest(long[] ids, int offset, int count) {
        Objects.requireNonNull(ids, "ids");
        if (closed) {
            throw new PsException(PsException.Code.CLOSED, "table '" + name() + "' is closed");
        }
        if (offset < 0 || count < 0 || offset > ids.length - count) {
            throw new PsException(PsException.Code.INVALID_ARGUMENT, "ids range [" + offset + ", +" + count
                    + ") is outside an array of " + ids.length);
        }
        long bytes = count * payloadBytes;
        if (count > limits.maxIdsPerRequest() || bytes > limits.maxRequestBytes()) {
            throw new PsException(PsException.Code.REQUEST_TOO_LARGE, "a request of " + count + " ids ("
                    + bytes + " bytes) to table '" + name() + "' exceeds the limits of "
                    + limits.maxIdsPerRequest() + " ids and " + limits.maxRequestBytes() + " bytes");
        }
        return bytes;
    }

    private void checkOpen(Shard shard) {
        if (shard.closed()) {
            throw new PsException(PsException.Code.CLOSED, "table '" + name() + "' is closed");
        }
    }

}
