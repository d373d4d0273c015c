package dev.ferry.ps;

import dev.ferry.ps.events.PsEvents;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The state of one parameter-server process: its sparse tables and dense tensors, the slot
 * table it was given, and its checkpoints. The RPC layer decodes a request and calls
 * {@link #pull} or {@link #push} with views of the registered request and response buffers;
 * nothing here copies through the heap.
 *
 * <p>Modes: {@link #create} and {@link #open} give a training server; {@link #serving} loads a
 * checkpoint read-only: pushes and new tables are rejected with {@code READ_ONLY}, and pulls of
 * ids absent from the checkpoint return the table's initial values without storing them.
 *
 * <p>Thread-safe. Errors are {@link PsException}s; see {@link SparseTable} for what concurrent
 * readers see.
 */
public final class ParameterServer implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.ps");

    private final PsConfig config;
    private final boolean readOnly;
    /** Serving mode whose tables are made here and fed by a training cluster's export. */
    private boolean follows;
    private final Map<String, SparseTable> tables = new ConcurrentHashMap<>();
    private final Map<String, DenseTensor> tensors = new ConcurrentHashMap<>();
    private final Object checkpointLock = new Object();
    /** Seals the live export's tick before a checkpoint's rows are read ({@link #exportStamp}); null: none. */
    private volatile java.util.function.Supplier<ExportStamp> exportStamp;
    private final Path restoredFrom;
    private final List<String> rejected;
    private volatile SlotTable slots;
    private volatile boolean closed;
    /** The evictor thread, started with the first table that evicts (training servers only); guarded by {@code tables}. */
    private Evictors evictors;

    private ParameterServer(PsConfig config, boolean readOnly, Checkpoints.Loaded loaded, Path restoredFrom,
            List<String> rejected) {
        this.config = Objects.requireNonNull(config, "config");
        this.readOnly = readOnly;
        this.restoredFrom = restoredFrom;
        this.rejected = List.copyOf(rejected);
        if (loaded != null) {
            tables.putAll(loaded.tables());
            tensors.putAll(loaded.tensors());
            slots = loaded.slots();
            loaded.tables().values().forEach(this::startEvictorsFor);
        }
    }

    /** Starts the evictor thread if {@code table} deletes rows and it is not running yet. */
    private void startEvictorsFor(SparseTable table) {
        synchronized (tables) {
            if (table.evictor() != null && evictors == null && !closed) {
                evictors = new Evictors(tables::values);
                evictors.start();
            }
        }
    }

    /** An empty training server. */
    public static ParameterServer create(PsConfig config) {
        return new ParameterServer(config, false, null, null, List.of());
    }

    /**
     * An empty read-only server whose rows come from a training cluster's export (merged whole
     * rows, {@link RowTransfer#merge}): pushes are rejected with {@code READ_ONLY} as in serving
     * mode, but sparse tables can be created (read-only ones), by the export's follower or by a
     * slot move within the serving cluster.
     */
    public static ParameterServer follower(PsConfig config) {
        ParameterServer ps = new ParameterServer(config, true, null, null, List.of());
        ps.follows = true;
        return ps;
    }

    /**
     * A training server restored from the newest complete checkpoint in {@code directory} that
     * verifies, or an empty one if the directory holds none. Checkpoints that fail verification are
     * skipped, logged and listed in {@link #rejectedCheckpoints()}, and left on disk.
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} if checkpoints exist and none verifies
     */
    public static ParameterServer open(PsConfig config, Path directory) {
        return restoreLatest(config, directory, false, false);
    }

    /**
     * A read-only server for inference, loaded from the newest complete checkpoint in
     * {@code directory} that verifies.
     *
     * @throws PsException {@code NO_CHECKPOINT} if there is none; {@code CHECKPOINT_CORRUPT} if
     *                     none verifies
     */
    public static ParameterServer serving(PsConfig config, Path directory) {
        return restoreLatest(config, directory, true, true);
    }

    /**
     * A server loaded from exactly one checkpoint directory ({@code .../checkpoint-00000007}).
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} naming the file and the problem if it does not verify
     */
    public static ParameterServer restore(PsConfig config, Path checkpoint, boolean readOnly) {
        Checkpoints.Loaded loaded = loadRecorded(checkpoint, config, readOnly);
        return new ParameterServer(config, readOnly, loaded, checkpoint, List.of());
    }

    /** {@link Checkpoints#load}, told to the flight recorder. */
    private static Checkpoints.Loaded loadRecorded(Path checkpoint, PsConfig config, boolean readOnly) {
        long start = System.nanoTime();
        try {
            Checkpoints.Loaded loaded = Checkpoints.load(checkpoint, config, readOnly);
            long rows = 0;
            for (SparseTable t : loaded.tables().values()) {
                rows += t.stats().rows();
            }
            PsEvents.checkpointRestored(checkpoint, loaded.tables().size() + loaded.tensors().size(), rows, readOnly,
                    null, start);
            return loaded;
        } catch (PsException e) {
            PsEvents.checkpointRestored(checkpoint, 0, 0, readOnly, e.getMessage(), start);
            throw e;
        }
    }

    private static ParameterServer restoreLatest(PsConfig config, Path directory, boolean readOnly, boolean required) {
        Objects.requireNonNull(config, "config");
        List<Path> candidates;
        try {
            candidates = Checkpoints.existing(directory, false);
        } catch (IOException e) {
            throw new PsException(PsException.Code.CHECKPOINT_IO, "listing " + directory + " failed: " + e, e);
        }
        if (candidates.isEmpty()) {
            if (required) {
                throw new PsException(PsException.Code.NO_CHECKPOINT, "no complete checkpoint in " + directory);
            }
            return new ParameterServer(config, readOnly, null, null, List.of());
        }
        List<String> rejected = new ArrayList<>();
        for (Path candidate : candidates) {
            try {
                Checkpoints.Loaded loaded = loadRecorded(candidate, config, readOnly);
                return new ParameterServer(config, readOnly, loaded, candidate, rejected);
            } catch (PsException e) {
                if (e.code() != PsException.Code.CHECKPOINT_CORRUPT) {
                    throw e;
                }
                LOG.log(System.Logger.Level.WARNING, "skipping a checkpoint: " + e.getMessage());
                rejected.add(e.getMessage());
            }
        }
        throw new PsException(PsException.Code.CHECKPOINT_CORRUPT, "no checkpoint in " + directory
                + " verifies: " + String.join("; ", rejected));
    }

    /** Whether this server rejects pushes (serving mode). */
    public boolean readOnly() {
        return readOnly;
    }

    /** Its settings. */
    public PsConfig config() {
        return config;
    }

    /** The checkpoint it was restored from, if any. */
    public Optional<Path> restoredFrom() {
        return Optional.ofNullable(restoredFrom);
    }

    /** Why newer checkpoints were skipped when it was restored; empty if none was. */
    public List<String> rejectedCheckpoints() {
        return rejected;
    }

    /**
     * Creates a sparse table.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}
     */
    public SparseTable createTable(TableConfig table) {
        Objects.requireNonNull(table, "table");
        synchronized (tables) {
            checkCreate(table.name());
            SparseTable created = new SparseTable(table, config, readOnly);
            tables.put(table.name(), created);
            startEvictorsFor(created);
            return created;
        }
    }

    /**
     * Creates a dense tensor with its initial weights.
     *
     * @throws PsException {@code TABLE_EXISTS}, {@code READ_ONLY}
     */
    public DenseTensor createDense(DenseConfig tensor) {
        Objects.requireNonNull(tensor, "tensor");
        synchronized (tables) {
            checkCreate(tensor.name());
            DenseTensor created = new DenseTensor(tensor, config, readOnly);
            tensors.put(tensor.name(), created);
            return created;
        }
    }

    /**
     * Removes the dense tensor of that name and frees its memory (a stale copy a server no longer
     * owns); returns whether there was one. Calls on it fail with {@code CLOSED} from then on.
     */
    public boolean dropDense(String name) {
        synchronized (tables) {
            DenseTensor tensor = tensors.remove(name);
            if (tensor == null) {
                return false;
            }
            tensor.close();
            return true;
        }
    }

    /**
     * The sparse table of that name.
     *
     * @throws PsException {@code UNKNOWN_TABLE}
     */
    public SparseTable table(String name) {
        checkOpen();
        SparseTable table = tables.get(name);
        if (table == null) {
            throw new PsException(PsException.Code.UNKNOWN_TABLE, "no sparse table '" + name + "'; tables: "
                    + tables.keySet().stream().sorted().toList());
        }
        return table;
    }

    /**
     * The dense tensor of that name.
     *
     * @throws PsException {@code UNKNOWN_TABLE}
     */
    public DenseTensor dense(String name) {
        checkOpen();
        DenseTensor tensor = tensors.get(name);
        if (tensor == null) {
            throw new PsException(PsException.Code.UNKNOWN_TABLE, "no dense tensor '" + name + "'; tensors: "
                    + tensors.keySet().stream().sorted().toList());
        }
        return tensor;
    }

    /** Configuration, size and memory of a table or tensor ({@code UNKNOWN_TABLE} if neither). */
    public TableStats describe(String name) {
        checkOpen();
        SparseTable table = tables.get(name);
        if (table != null) {
            return table.stats();
        }
        DenseTensor tensor = tensors.get(name);
        if (tensor == null) {
            throw new PsException(PsException.Code.UNKNOWN_TABLE, "no sparse table or dense tensor named '" + name
                    + "'; sparse tables: " + tables.keySet().stream().sorted().toList() + ", dense tensors: "
                    + tensors.keySet().stream().sorted().toList());
        }
        return tensor.stats();
    }

    /** Every table and tensor, by name. */
    public List<TableStats> stats() {
        checkOpen();
        List<TableStats> all = new ArrayList<>();
        tables.values().forEach(t -> all.add(t.stats()));
        tensors.values().forEach(t -> all.add(t.stats()));
        all.sort((a, b) -> a.name().compareTo(b.name()));
        return all;
    }

    /**
     * A pull as it arrives from the wire: {@link SparseTable#gather} after checking that the
     * client's dimension is the table's.
     *
     * @throws PsException {@code UNKNOWN_TABLE}, {@code WRONG_DIMENSION}, and those of gather
     */
    public void pull(String table, int dimension, long[] ids, int offset, int count, MemorySegment out) {
        checkDimension(table(table), dimension).gather(ids, offset, count, out);
    }

    /**
     * A push as it arrives from the wire: {@link SparseTable#apply} after checking the mode and
     * that the client's dimension is the table's.
     *
     * @throws PsException {@code READ_ONLY}, {@code UNKNOWN_TABLE}, {@code WRONG_DIMENSION}, and
     *                     those of apply
     */
    public void push(String table, int dimension, long[] ids, int offset, int count, MemorySegment gradients) {
        checkWritable();
        checkDimension(table(table), dimension).apply(ids, offset, count, gradients);
    }

    /** The slot table this server was given (kept in checkpoints), or null. */
    public SlotTable slotTable() {
        return slots;
    }

    /** Records the cluster's slot table, to be saved with the next checkpoint. */
    public void slotTable(SlotTable value) {
        slots = Objects.requireNonNull(value, "value");
    }

    /**
     * Writes a checkpoint of every table and tensor into {@code directory} while the server keeps
     * serving. Each shard is copied under its lock, which is held for that one copy, so each shard
     * is a consistent point in time; shards are not one global cut unless pushes are paused. The
     * checkpoint is written in a temporary directory and renamed when complete, and the newest
     * {@link PsConfig#checkpointsKept()} are kept.
     *
     * @return the new checkpoint's directory
     * @throws PsException {@code CHECKPOINT_IO}; earlier checkpoints are untouched then
     */
    public Path checkpoint(Path directory) {
        Objects.requireNonNull(directory, "directory");
        checkOpen();
        synchronized (checkpointLock) {
            // Sealed first: a table or row made after the seal is in the checkpoint or in a later delta.
            java.util.function.Supplier<ExportStamp> stamper = exportStamp;
            ExportStamp stamp = stamper == null ? null : stamper.get();
            List<SparseTable> sparse = new ArrayList<>(tables.values());
            sparse.sort((a, b) -> a.name().compareTo(b.name()));
            List<DenseTensor> dense = new ArrayList<>(tensors.values());
            dense.sort((a, b) -> a.name().compareTo(b.name()));
            long start = System.nanoTime();
            Path written = Checkpoints.write(directory, sparse, dense, slots, config.checkpointsKept(), stamp);
            long rows = 0;
            long bytes = 0;
            for (SparseTable t : sparse) {
                TableStats st = t.stats();
                rows += st.rows();
                bytes += st.reservedBytes();
            }
            PsEvents.checkpointWritten(written, sparse.size() + dense.size(), rows, bytes, start);
            return written;
        }
    }

    /**
     * Sets what each {@link #checkpoint} asks, before it reads any row, for the live export's
     * stamp to keep in the manifest (the tick sealed then): the export's hook, null for none.
     */
    public void exportStamp(java.util.function.Supplier<ExportStamp> stamper) {
        this.exportStamp = stamper;
    }

    /** Frees every table's memory; later calls fail with {@code CLOSED}. */
    @Override
    public void close() {
        synchronized (tables) {
            if (closed) {
                return;
            }
            closed = true;
            if (evictors != null) {
                evictors.close();
            }
            tables.values().forEach(SparseTable::close);
            tensors.values().forEach(DenseTensor::close);
        }
    }

    private void checkCreate(String name) {
        checkOpen();
        if (!follows) {
            checkWritable();
        }
        if (tables.containsKey(name) || tensors.containsKey(name)) {
            throw new PsException(PsException.Code.TABLE_EXISTS, "a table or tensor named '" + name + "' exists");
        }
    }

    private void checkWritable() {
        if (readOnly) {
            throw new PsException(PsException.Code.READ_ONLY, "this server is read-only (serving mode)");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new PsException(PsException.Code.CLOSED, "the parameter server is closed");
        }
    }

    private static SparseTable checkDimension(SparseTable table, int dimension) {
        if (dimension != table.dimension()) {
            throw new PsException(PsException.Code.WRONG_DIMENSION, "table '" + table.name() + "' has dimension "
                    + table.dimension() + "; the request says " + dimension);
        }
        return table;
    }
}
