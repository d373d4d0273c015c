package dev.ferry.ps;

import static dev.ferry.ps.CheckpointDescriptor.FileSummary;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * Writing and loading checkpoints ({@link CheckpointDescriptor}). The manifest's content is a
 * {@link DataOutputStream} record:
 * <pre>
 *  version i32, sequence i64,
 *  [version 3: export stamp: present u8, then if 1: log id i64, tick i64, 1,024 x slot bits i64]
 *  servers i32 (0: no slot table), then 65,536 x server i32,
 *  tables i32, then per table:   name, dimension i32, optimizer, initializer, maxRows i64, shards i32,
 *                                [version 2: pull format, admission, eviction]
 *                                per shard: file name, rows i64, bytes i64, crc32c i32
 *  tensors i32, then per tensor: name, length i32, optimizer, initializer, file name, bytes i64, crc32c i32
 *  optimizer:   kind u8 (0 SGD, 1 Adagrad, 2 Adam, 3 FTRL), its hyper-parameters as f64
 *  initializer: kind u8 (0 zeros, 1 uniform, 2 normal), two f64 and the seed i64
 *  pull format: its wire code u8 ({@link PullFormat#code()})
 *  admission:   kind u8 (0 always, 1 after a count, 2 probability), count i32, filter cells i32, p f64
 *  eviction:    ttl ns i64 (0 none), capacity i64 (0 none), policy u8 ({@link EvictionPolicy}), margin f64
 * </pre>
 * Version 1 (written before tables had a pull format, an admission rule and eviction) is read as
 * f32, {@link Admission#always()} and {@link Eviction#none()}.
 */
final class Checkpoints {

    /** Fault injection: called after each file of a checkpoint is written; tests make it throw. */
    interface WriteFault {
        void afterFile(Path file) throws IOException;
    }

    static volatile WriteFault writeFault = file -> { };

    private Checkpoints() {
    }

    /** What a loaded checkpoint holds. */
    record Loaded(long sequence, SlotTable slots, Map<String, SparseTable> tables, Map<String, DenseTensor> tensors,
            ExportStamp export) {
        void close() {
            tables.values().forEach(SparseTable::close);
            tensors.values().forEach(DenseTensor::close);
        }
    }

    /**
     * Writes a checkpoint of {@code tables} and {@code tensors} into {@code directory} and keeps
     * the newest {@code kept} complete ones. Each shard is copied under its lock, then written
     * with no lock held.
     */
    static Path write(Path directory, List<SparseTable> tables, List<DenseTensor> tensors, SlotTable slots, int kept) {
        return write(directory, tables, tensors, slots, kept, null);
    }

    /** {@link #write}, with the live export's stamp (null: none) in the manifest. */
    static Path write(Path directory, List<SparseTable> tables, List<DenseTensor> tensors, SlotTable slots, int kept,
            ExportStamp export) {
        try {
            Files.createDirectories(directory);
            long sequence = 1 + existing(directory, true).stream().mapToLong(Checkpoints::sequenceOf).max().orElse(0);
            Path tmp = directory.resolve(name(sequence) + CheckpointDescriptor.TMP_SUFFIX);
            Path done = directory.resolve(name(sequence));
            Files.createDirectory(tmp);
            try {
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                DataOutputStream manifest = new DataOutputStream(bytes);
                manifest.writeInt(CheckpointDescriptor.MANIFEST_VERSION);
                manifest.writeLong(sequence);
                ExportCheckpoints.writeStamp(manifest, export);
                if (slots == null) {
                    manifest.writeInt(0);
                } else {
                    manifest.writeInt(slots.serverCount());
                    for (int server : slots.toArray()) {
                        manifest.writeInt(server);
                    }
                }
                manifest.writeInt(tables.size());
                for (int t = 0; t < tables.size(); t++) {
                    SparseTable table = tables.get(t);
                    TableConfig config = table.config();
                    manifest.writeUTF(config.name());
                    manifest.writeInt(config.dimension());
                    writeOptimizer(manifest, config.optimizer());
                    writeInitializer(manifest, config.initializer());
                    manifest.writeLong(config.maxRows());
                    manifest.writeInt(config.shards());
                    writeTableRules(manifest, config);
                    for (int s = 0; s < table.shardCount(); s++) {
                        String file = "t" + t + "-s" + s + ".rows";
                        try (Arena arena = Arena.ofConfined()) {
                            MemorySegment rows = table.wholeRows().snapshotShard(s, arena);
                            FileSummary summary = CheckpointDescriptor.write(tmp.resolve(file),
                                    CheckpointDescriptor.KIND_ROWS, rows);
                            writeFault.afterFile(tmp.resolve(file));
                            manifest.writeUTF(file);
                            manifest.writeLong(rows.byteSize() / table.rowBytes());
                            manifest.writeLong(summary.bytes());
                            manifest.writeInt(summary.crc());
                        }
                    }
                }
                manifest.writeInt(tensors.size());
                for (int d = 0; d < tensors.size(); d++) {
                    DenseTensor tensor = tensors.get(d);
                    DenseConfig config = tensor.config();
                    manifest.writeUTF(config.name());
                    manifest.writeInt(config.length());
                    writeOptimizer(manifest, config.optimizer());
                    writeInitializer(manifest, config.initializer());
                    String file = "d" + d + ".dense";
                    try (Arena arena = Arena.ofConfined()) {
                        FileSummary summary = CheckpointDescriptor.write(tmp.resolve(file),
                                CheckpointDescriptor.KIND_DENSE, tensor.snapshot(arena));
                        writeFault.afterFile(tmp.resolve(file));
                        manifest.writeUTF(file);
                        manifest.writeLong(summary.bytes());
                        manifest.writeInt(summary.crc());
                    }
                }
                manifest.flush();
                CheckpointDescriptor.write(tmp.resolve(CheckpointDescriptor.MANIFEST), CheckpointDescriptor.KIND_MANIFEST,
                        MemorySegment.ofArray(bytes.toByteArray()));
                writeFault.afterFile(tmp.resolve(CheckpointDescriptor.MANIFEST));
                forceDirectory(tmp);
                Files.move(tmp, done, StandardCopyOption.ATOMIC_MOVE);
                forceDirectory(directory);
            } catch (IOException | RuntimeException e) {
                deleteTree(tmp);
                throw e;
            }
            prune(directory, kept, sequence);
            return done;
        } catch (IOException e) {
            throw new PsException(PsException.Code.CHECKPOINT_IO, "writing a checkpoint in " + directory + " failed: " + e, e);
        }
    }

    /** Complete checkpoints in {@code directory}, newest first (with {@code tmp}: in-progress ones too). */
    static List<Path> existing(Path directory, boolean tmp) throws IOException {
        if (!Files.isDirectory(directory)) {
            return List.of();
        }
        try (Stream<Path> entries = Files.list(directory)) {
            return entries.filter(p -> sequenceOf(p) > 0 && (tmp || !p.getFileName().toString()
                            .endsWith(CheckpointDescriptor.TMP_SUFFIX)))
                    .sorted(Comparator.comparingLong(Checkpoints::sequenceOf).reversed())
                    .toList();
        }
    }

    /**
     * Loads one checkpoint into new tables, verifying every file before it is used
     * ({@link CheckpointReader#load}).
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} (nothing is kept) or {@code CHECKPOINT_IO}
     */
    static Loaded load(Path checkpoint, PsConfig limits, boolean readOnly) {
        return CheckpointReader.load(checkpoint, limits, readOnly);
    }

    static long sequenceOf(Path path) {
        String name = path.getFileName().toString();
        if (!name.startsWith(CheckpointDescriptor.PREFIX)) {
            return -1;
        }
        String digits = name.substring(CheckpointDescriptor.PREFIX.length());
        if (digits.endsWith(CheckpointDescriptor.TMP_SUFFIX)) {
            digits = digits.substring(0, digits.length() - CheckpointDescriptor.TMP_SUFFIX.length());
        }
        if (digits.isEmpty() || digits.length() > 18 || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            return -1;
        }
        return Long.parseLong(digits);
    }

    private static String name(long sequence) {
        return CheckpointDescriptor.PREFIX + String.format("%08d", sequence);
    }

    /** Deletes leftover temporary directories and all but the newest {@code kept} complete checkpoints. */
    private static void prune(Path directory, int kept, long current) throws IOException {
        List<Path> all = existing(directory, true);
        List<Path> complete = new ArrayList<>();
        for (Path p : all) {
            if (p.getFileName().toString().endsWith(CheckpointDescriptor.TMP_SUFFIX)) {
                if (sequenceOf(p) < current) {
                    deleteTree(p);
                }
            } else {
                complete.add(p);
            }
        }
        for (int i = kept; i < complete.size(); i++) {
            deleteTree(complete.get(i));
        }
    }

    private static void deleteTree(Path root) {
        if (!Files.exists(root)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void forceDirectory(Path directory) {
        try (FileChannel channel = FileChannel.open(directory, StandardOpenOption.READ)) {
            channel.force(true);
        } catch (IOException e) {
            // Some file systems cannot sync a directory; the files themselves are forced.
        }
    }

    /** A table's pull format, admission rule and eviction settings (manifest version 2). */
    private static void writeTableRules(DataOutputStream out, TableConfig config) throws IOException {
        out.writeByte(config.pullFormat().code());
        switch (config.admission()) {
            case Admission.Always a -> {
                out.writeByte(0);
                out.writeInt(0);
                out.writeInt(0);
                out.writeDouble(0);
            }
            case Admission.After a -> {
                out.writeByte(1);
                out.writeInt(a.count());
                out.writeInt(a.filterCells());
                out.writeDouble(0);
            }
            case Admission.Probability p -> {
                out.writeByte(2);
                out.writeInt(0);
                out.writeInt(0);
                out.writeDouble(p.p());
            }
        }
        Eviction e = config.eviction();
        out.writeLong(e.ttlNanos());
        out.writeLong(e.capacity());
        out.writeByte(e.policy().code());
        out.writeDouble(e.margin());
    }

    private static void writeOptimizer(DataOutputStream out, Optimizer optimizer) throws IOException {
        switch (optimizer) {
            case Optimizer.Sgd o -> {
                out.writeByte(0);
                out.writeDouble(o.learningRate());
            }
            case Optimizer.Adagrad o -> {
                out.writeByte(1);
                out.writeDouble(o.learningRate());
                out.writeDouble(o.initialAccumulator());
                out.writeDouble(o.epsilon());
            }
            case Optimizer.Adam o -> {
                out.writeByte(2);
                out.writeDouble(o.learningRate());
                out.writeDouble(o.beta1());
                out.writeDouble(o.beta2());
                out.writeDouble(o.epsilon());
            }
            case Optimizer.Ftrl o -> {
                out.writeByte(3);
                out.writeDouble(o.alpha());
                out.writeDouble(o.beta());
                out.writeDouble(o.l1());
                out.writeDouble(o.l2());
            }
        }
    }

    private static void writeInitializer(DataOutputStream out, Initializer initializer) throws IOException {
        switch (initializer) {
            case Initializer.Zeros z -> {
                out.writeByte(0);
                out.writeDouble(0);
                out.writeDouble(0);
                out.writeLong(0);
            }
            case Initializer.Uniform u -> {
                out.writeByte(1);
                out.writeDouble(u.low());
                out.writeDouble(u.high());
                out.writeLong(u.seed());
            }
            case Initializer.Normal n -> {
                out.writeByte(2);
                out.writeDouble(n.mean());
                out.writeDouble(n.stddev());
                out.writeLong(n.seed());
            }
        }
    }

}
