package dev.ferry.ps;

import static dev.ferry.ps.CheckpointDescriptor.FileSummary;

import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.UTFDataFormatException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * Reading checkpoints ({@link Checkpoints} writes them; the manifest's record is described
 * there): a {@link #scan} hands a checkpoint's shards and tensors to a {@link Visitor} one
 * verified file at a time, so that a reader that only picks rows out (the live export's
 * catch-up, {@link ExportCheckpoints#stream}) needs memory for one file, not the checkpoint;
 * {@link #load} builds new tables and tensors from a scan.
 */
final class CheckpointReader {

    private CheckpointReader() {
    }

    /**
     * What a {@link #scan} of a checkpoint hands out, in the manifest's order, each file verified
     * (its kind, length and CRC32C) before it is handed.
     */
    interface Visitor {
        /** The manifest's head, before anything else; false ends the scan there. */
        boolean manifest(long sequence, SlotTable slots, ExportStamp export);

        /** A sparse table's configuration, before its shards. */
        void table(TableConfig config);

        /** Shard {@code shard} of the table: whole rows (RowLayout), as many as the manifest says; valid only during the call. */
        void shard(TableConfig config, int shard, MemorySegment data, String source);

        /** A dense tensor's values; valid only during the call. */
        void tensor(DenseConfig config, MemorySegment data, String source);
    }

    /** Builds new tables and tensors from a scan ({@link #load}). */
    private static final class TableBuilder implements Visitor {
        private final PsConfig limits;
        private final boolean readOnly;
        private final Map<String, SparseTable> tables = new LinkedHashMap<>();
        private final Map<String, DenseTensor> tensors = new LinkedHashMap<>();
        private long sequence;
        private SlotTable slots;
        private ExportStamp export;

        TableBuilder(PsConfig limits, boolean readOnly) {
            this.limits = limits;
            this.readOnly = readOnly;
        }

        @Override
        public boolean manifest(long sequence, SlotTable slots, ExportStamp export) {
            this.sequence = sequence;
            this.slots = slots;
            this.export = export;
            return true;
        }

        @Override
        public void table(TableConfig config) {
            tables.put(config.name(), new SparseTable(config, limits, readOnly));
        }

        @Override
        public void shard(TableConfig config, int shard, MemorySegment data, String source) {
            SparseTable table = tables.get(config.name());
            table.wholeRows().loadShard(shard, data, source);
        }

        @Override
        public void tensor(DenseConfig config, MemorySegment data, String source) {
            DenseTensor tensor = new DenseTensor(config, limits, readOnly);
            tensors.put(config.name(), tensor);
            tensor.load(data, source);
        }

        Checkpoints.Loaded loaded() {
            return new Checkpoints.Loaded(sequence, slots, tables, tensors, export);
        }

        void closeAll() {
            tables.values().forEach(SparseTable::close);
            tensors.values().forEach(DenseTensor::close);
        }
    }

    /**
     * Loads one checkpoint into new tables, verifying every file before it is used.
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} (nothing is kept) or {@code CHECKPOINT_IO}
     */
    static Checkpoints.Loaded load(Path checkpoint, PsConfig limits, boolean readOnly) {
        TableBuilder builder = new TableBuilder(limits, readOnly);
        boolean done = false;
        try {
            scan(checkpoint, builder);
            Checkpoints.Loaded loaded = builder.loaded();
            done = true;
            return loaded;
        } finally {
            if (!done) {
                builder.closeAll();
            }
        }
    }

    /**
     * Reads one checkpoint's manifest and hands its tables' shards and its tensors to
     * {@code visitor} one file at a time, each verified first: memory for one file at a time.
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} (with what was handed before it) or {@code CHECKPOINT_IO}
     */
    static void scan(Path checkpoint, Visitor visitor) {
        try (Arena arena = Arena.ofConfined()) {
            String where = checkpoint.toString();
            MemorySegment content = CheckpointDescriptor.read(checkpoint.resolve(CheckpointDescriptor.MANIFEST),
                    CheckpointDescriptor.KIND_MANIFEST, null, arena, where + "/" + CheckpointDescriptor.MANIFEST);
            DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(content.toArray(ValueLayout.JAVA_BYTE)));
            try {
                int version = in.readInt();
                if (version < 1 || version > CheckpointDescriptor.MANIFEST_VERSION) {
                    throw SparseTable.corrupt(where, "manifest version " + version + ", this code reads 1 to "
                            + CheckpointDescriptor.MANIFEST_VERSION);
                }
                long sequence = in.readLong();
                ExportStamp export = version >= 3 ? ExportCheckpoints.readStamp(in) : null;
                int servers = in.readInt();
                SlotTable slots = null;
                if (servers > 0) {
                    int[] map = new int[Slots.COUNT];
                    for (int i = 0; i < map.length; i++) {
                        map[i] = in.readInt();
                    }
                    slots = SlotTable.of(map, servers);
                }
                if (!visitor.manifest(sequence, slots, export)) {
                    return;
                }
                Set<String> names = new HashSet<>();
                int tableCount = in.readInt();
                for (int t = 0; t < tableCount; t++) {
                    TableConfig config = new TableConfig(in.readUTF(), in.readInt(), readOptimizer(in),
                            readInitializer(in), in.readLong(), in.readInt());
                    if (version >= 2) {
                        config = readTableRules(in, config);
                    }
                    if (!names.add(config.name())) {
                        throw SparseTable.corrupt(where, "table '" + config.name() + "' appears twice");
                    }
                    visitor.table(config);
                    for (int s = 0; s < config.shards(); s++) {
                        String file = in.readUTF();
                        long rows = in.readLong();
                        FileSummary summary = new FileSummary(in.readLong(), in.readInt());
                        String source = where + "/" + file;
                        try (Arena shardArena = Arena.ofConfined()) {
                            MemorySegment data = CheckpointDescriptor.read(fileIn(checkpoint, file),
                                    CheckpointDescriptor.KIND_ROWS, summary, shardArena, source);
                            long rowBytes = RowLayout.rowBytes(config.dimension(), config.optimizer().stateSlots());
                            if (data.byteSize() != rows * rowBytes) {
                                throw SparseTable.corrupt(source, data.byteSize() + " bytes of rows; the manifest says "
                                        + rows + " rows of " + rowBytes);
                            }
                            visitor.shard(config, s, data, source);
                        }
                    }
                }
                int tensorCount = in.readInt();
                for (int d = 0; d < tensorCount; d++) {
                    DenseConfig config = new DenseConfig(in.readUTF(), in.readInt(), readOptimizer(in),
                            readInitializer(in));
                    if (!names.add(config.name())) {
                        throw SparseTable.corrupt(where, "name '" + config.name() + "' appears twice");
                    }
                    String file = in.readUTF();
                    FileSummary summary = new FileSummary(in.readLong(), in.readInt());
                    String source = where + "/" + file;
                    try (Arena tensorArena = Arena.ofConfined()) {
                        // The file first: its size, not the manifest's claimed length, bounds what is allocated.
                        MemorySegment data = CheckpointDescriptor.read(fileIn(checkpoint, file),
                                CheckpointDescriptor.KIND_DENSE, summary, tensorArena, source);
                        if (data.byteSize() != config.bytes()) {
                            throw SparseTable.corrupt(source, data.byteSize() + " bytes; tensor '" + config.name()
                                    + "' takes " + config.bytes());
                        }
                        visitor.tensor(config, data, source);
                    }
                }
                if (in.available() != 0) {
                    throw SparseTable.corrupt(where, in.available() + " bytes after the manifest's end");
                }
            } catch (EOFException e) {
                throw SparseTable.corrupt(where + "/" + CheckpointDescriptor.MANIFEST, "ends early");
            } catch (UTFDataFormatException e) {
                throw SparseTable.corrupt(where + "/" + CheckpointDescriptor.MANIFEST, "a name is not modified UTF-8: "
                        + e.getMessage());
            } catch (PsException e) {
                if (e.code() == PsException.Code.INVALID_ARGUMENT) {
                    throw SparseTable.corrupt(where + "/" + CheckpointDescriptor.MANIFEST, e.getMessage());
                }
                throw e;
            }
        } catch (IOException e) {
            throw new PsException(PsException.Code.CHECKPOINT_IO, "reading checkpoint " + checkpoint + " failed: " + e, e);
        }
    }

    /**
     * The file of {@code checkpoint} that a manifest names: a plain file name, never a path that
     * leads elsewhere ("../x", "/etc/x") nor one the file system refuses (a NUL byte).
     */
    private static Path fileIn(Path checkpoint, String name) {
        if (name.isEmpty() || name.equals(".") || name.equals("..") || name.indexOf('/') >= 0
                || name.indexOf('\\') >= 0 || name.indexOf('\0') >= 0) {
            throw SparseTable.corrupt(checkpoint + "/" + CheckpointDescriptor.MANIFEST, "names a file outside the checkpoint: '"
                    + name.replace("\0", "\\0") + "'");
        }
        return checkpoint.resolve(name);
    }

    static TableConfig readTableRules(DataInputStream in, TableConfig config) throws IOException {
        PullFormat format = PullFormat.ofCode(in.readUnsignedByte());
        int kind = in.readUnsignedByte();
        int count = in.readInt();
        int cells = in.readInt();
        double p = in.readDouble();
        Admission admission = switch (kind) {
            case 0 -> Admission.always();
            case 1 -> Admission.after(count, cells);
            case 2 -> Admission.probability(p);
            default -> throw TableConfig.invalid("unknown admission kind " + kind);
        };
        Eviction eviction = new Eviction(in.readLong(), in.readLong(), EvictionPolicy.ofCode(in.readUnsignedByte()),
                in.readDouble());
        return config.withPullFormat(format).withAdmission(admission).withEviction(eviction);
    }

    static Optimizer readOptimizer(DataInputStream in) throws IOException {
        int kind = in.readUnsignedByte();
        return switch (kind) {
            case 0 -> new Optimizer.Sgd(in.readDouble());
            case 1 -> new Optimizer.Adagrad(in.readDouble(), in.readDouble(), in.readDouble());
            case 2 -> new Optimizer.Adam(in.readDouble(), in.readDouble(), in.readDouble(), in.readDouble());
            case 3 -> new Optimizer.Ftrl(in.readDouble(), in.readDouble(), in.readDouble(), in.readDouble());
            default -> throw TableConfig.invalid("unknown optimizer kind " + kind);
        };
    }

    static Initializer readInitializer(DataInputStream in) throws IOException {
        int kind = in.readUnsignedByte();
        double a = in.readDouble();
        double b = in.readDouble();
        long seed = in.readLong();
        return switch (kind) {
            case 0 -> new Initializer.Zeros();
            case 1 -> new Initializer.Uniform(a, b, seed);
            case 2 -> new Initializer.Normal(a, b, seed);
            default -> throw TableConfig.invalid("unknown initializer kind " + kind);
        };
    }
}
