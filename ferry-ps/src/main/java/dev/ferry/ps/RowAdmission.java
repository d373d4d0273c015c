package dev.ferry.ps;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Which ids of a {@link SparseTable} get a row, and the row count: the table's {@link Admission}
 * rule per shard ({@link AdmissionGate}), its eviction capacity and {@code maxRows}, the creation
 * of a row with its initial values, and the counters of admitted, rejected and refused ids.
 * Every method that touches a shard runs under that shard's lock (asserted); the counters are
 * read from any thread.
 */
final class RowAdmission {

    /** A sighting not admitted, or an id not stored: no row. */
    static final int ABSENT = -1;

    private final TableConfig config;
    private final OptimizerKernel kernel;
    private final int shardCount;
    private final AtomicLong rowCount = new AtomicLong();
    /** Per shard, guarded by its lock: whether an id not stored gets a row now. */
    private final AdmissionGate[] gates;
    private final LongAdder admitted = new LongAdder();
    private final LongAdder rejected = new LongAdder();
    private final LongAdder refusedFull = new LongAdder();
    /** Rows stored beyond which new ids are refused: the eviction capacity, or none. */
    private final long storeLimit;

    RowAdmission(TableConfig config, OptimizerKernel kernel, Shard[] shards) {
        this.config = config;
        this.kernel = kernel;
        this.shardCount = shards.length;
        this.gates = new AdmissionGate[shards.length];
        long seed = Slots.mix(config.name().hashCode());
        for (int s = 0; s < shards.length; s++) {
            gates[s] = AdmissionGate.of(config.admission(), s, shards.length, seed, shards[s].lock);
        }
        Eviction eviction = config.eviction();
        this.storeLimit = eviction.hasCapacity() ? eviction.capacity() : Long.MAX_VALUE;
    }

    /** Rows stored. */
    long rows() {
        return rowCount.get();
    }

    /** Accounts for {@code n} rows deleted. */
    void removed(int n) {
        rowCount.addAndGet(-n);
    }

    /** Counts a row loaded from a checkpoint; false if that passes {@code maxRows}. */
    boolean countLoaded() {
        return rowCount.incrementAndGet() <= config.maxRows();
    }

    long admitted() {
        return admitted.sum();
    }

    long rejected() {
        return rejected.sum();
    }

    long refusedFull() {
        return refusedFull.sum();
    }

    /** A snapshot of the admission counters. */
    SparseTable.AdmissionStats stats() {
        long bytes = 0;
        for (AdmissionGate gate : gates) {
            bytes += gate.bytes();
        }
        return new SparseTable.AdmissionStats(admitted.sum(), rejected.sum(), bytes);
    }

    /** Shard {@code s}'s gate; for tests. */
    AdmissionGate gate(int s) {
        return gates[s];
    }

    /**
     * Under the shard's lock: a sighting of an id it does not store. Creates its row (stamped
     * {@code now}) if the table is below its eviction capacity and the admission rule admits
     * it; else returns {@link #ABSENT}. At the capacity the rule does not see the sighting.
     *
     * @throws TableFullException past {@code maxRows}
     */
    int admitAndCreate(Shard shard, long id, long hash, long now) {
        assert shard.lock.isHeldByCurrentThread();
        if (storeLimit == Long.MAX_VALUE) {
            if (!gates[Slots.shardOfHash(hash, shardCount)].admit(id)) {
                rejected.increment();
                return ABSENT;
            }
            admitted.increment();
            int row = create(shard, id, hash);
            shard.touch(row, now);
            return row;
        }
        // The row is counted first, so that concurrent creates in other shards cannot pass the capacity.
        if (!reserve(id, storeLimit)) {
            rejected.increment();
            refusedFull.increment();
            return ABSENT;
        }
        if (!gates[Slots.shardOfHash(hash, shardCount)].admit(id)) {
            rowCount.decrementAndGet();
            rejected.increment();
            return ABSENT;
        }
        admitted.increment();
        int row = createReserved(shard, id, hash);
        shard.touch(row, now);
        return row;
    }

    /**
     * Under the shard's lock: a row for an id moved in or copied out, bounded by {@code maxRows}
     * only, with its initial values.
     *
     * @throws TableFullException past {@code maxRows}
     */
    int create(Shard shard, long id, long hash) {
        assert shard.lock.isHeldByCurrentThread();
        reserve(id, Long.MAX_VALUE);
        return createReserved(shard, id, hash);
    }

    /**
     * Counts one more row if that keeps the table within {@code limit} (false if not);
     * throws {@link TableFullException} past {@code maxRows}.
     */
    private boolean reserve(long id, long limit) {
        long n;
        do {
            n = rowCount.get();
            if (n >= config.maxRows()) {
                if (limit > config.maxRows()) {
                    throw new TableFullException(config.name(), config.maxRows(), id);
                }
                return false;
            }
            if (n >= limit) {
                return false;
            }
        } while (!rowCount.compareAndSet(n, n + 1));
        return true;
    }

    private int createReserved(Shard shard, long id, long hash) {
        shard.beginWrite();
        try {
            int row = shard.append(id, hash);
            initStored(shard, row, id, false);
            return row;
        } finally {
            shard.endWrite();
        }
    }

    /**
     * Under the shard's lock, inside a write: the initial row of {@code id} in slot {@code row},
     * zeroed first if {@code zero}, its stamp kept.
     */
    void initStored(Shard shard, int row, long id, boolean zero) {
        assert shard.lock.isHeldByCurrentThread();
        MemorySegment chunk = shard.chunk(row);
        long w = shard.weightsAt(row);
        long r = shard.recordAt(row);
        StoredRow layout = shard.layout();
        if (zero) {
            chunk.asSlice(w, layout.weightStride).fill((byte) 0);
            chunk.asSlice(r + StoredRow.STATE, layout.id).fill((byte) 0);
        }
        kernel.initRow(chunk, w, r + layout.id, r + layout.steps, r + StoredRow.STATE, id, config.dimension());
    }
}
