package dev.ferry.ps;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Checkpoints as the starting point of the live export: a training server finds its newest
 * checkpoint stamped by its current {@link ExportLog} ({@link #latest}); a serving server loads
 * one ({@link #load}) and then asks only for the changes after the stamp's tick.
 */
public final class ExportCheckpoints {

    private ExportCheckpoints() {
    }

    /** A checkpoint and its export stamp. */
    public record Stamped(Path path, ExportStamp stamp) {
    }

    /**
     * The newest complete checkpoint in {@code directory} whose manifest carries a stamp of log
     * {@code logId}, or empty: none, only older logs' (a restarted server), or unreadable ones.
     */
    public static Optional<Stamped> latest(Path directory, long logId) {
        if (directory == null) {
            return Optional.empty();
        }
        try {
            for (Path candidate : Checkpoints.existing(directory, false)) {
                try {
                    ExportStamp stamp = readStamp(candidate);
                    if (stamp != null && stamp.logId() == logId) {
                        return Optional.of(new Stamped(candidate, stamp));
                    }
                } catch (PsException unreadable) {
                    // Corrupt or being pruned: an older one may do.
                }
            }
        } catch (IOException e) {
            return Optional.empty();
        }
        return Optional.empty();
    }

    /** Where {@link #stream} hands a checkpoint's rows. */
    public interface RowSink {
        /** Whole rows ({@link RowLayout}) of one shard of {@code table}; valid only during the call. */
        void rows(TableConfig table, MemorySegment rows);
    }

    /**
     * Hands the rows of checkpoint {@code checkpoint} to {@code rows} one shard file at a time
     * and its dense tensors (read-only copies, valid only during the call) to {@code tensors},
     * each file verified first, if {@code accept} takes its stamp (null if it has none); returns
     * the stamp either way. Memory: one shard file, not the checkpoint. A file found corrupt
     * fails the call after the ones before it were handed.
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} or {@code CHECKPOINT_IO}
     */
    public static ExportStamp stream(Path checkpoint, PsConfig limits, java.util.function.Predicate<ExportStamp> accept,
            RowSink rows, Consumer<DenseTensor> tensors) {
        ExportStamp[] stamp = {null};
        CheckpointReader.scan(checkpoint, new CheckpointReader.Visitor() {
            @Override
            public boolean manifest(long sequence, SlotTable slots, ExportStamp export) {
                stamp[0] = export;
                return accept.test(export);
            }

            @Override
            public void table(TableConfig config) {
            }

            @Override
            public void shard(TableConfig config, int shard, MemorySegment data, String source) {
                rows.rows(config, data);
            }

            @Override
            public void tensor(DenseConfig config, MemorySegment data, String source) {
                DenseTensor tensor = new DenseTensor(config, limits, true);
                try {
                    tensor.load(data, source);
                    tensors.accept(tensor);
                } finally {
                    tensor.close();
                }
            }
        });
        return stamp[0];
    }

    /**
     * The export stamp of a checkpoint's manifest, read without loading anything else; null if it
     * has none (written before version 3, or by a server nobody exported from).
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} or {@code CHECKPOINT_IO}
     */
    static ExportStamp readStamp(Path checkpoint) {
        try (Arena arena = Arena.ofConfined()) {
            String where = checkpoint + "/" + CheckpointDescriptor.MANIFEST;
            MemorySegment content = CheckpointDescriptor.read(checkpoint.resolve(CheckpointDescriptor.MANIFEST),
                    CheckpointDescriptor.KIND_MANIFEST, null, arena, where);
            DataInputStream in = new DataInputStream(new java.io.ByteArrayInputStream(content.toArray(ValueLayout.JAVA_BYTE)));
            int version = in.readInt();
            if (version < 1 || version > CheckpointDescriptor.MANIFEST_VERSION) {
                throw SparseTable.corrupt(where, "manifest version " + version);
            }
            in.readLong();
            return version >= 3 ? readStamp(in) : null;
        } catch (EOFException e) {
            throw SparseTable.corrupt(checkpoint + "/" + CheckpointDescriptor.MANIFEST, "ends early");
        } catch (IOException e) {
            throw new PsException(PsException.Code.CHECKPOINT_IO, "reading checkpoint " + checkpoint + " failed: " + e, e);
        }
    }

    static void writeStamp(DataOutputStream out, ExportStamp stamp) throws IOException {
        out.writeByte(stamp == null ? 0 : 1);
        if (stamp != null) {
            out.writeLong(stamp.logId());
            out.writeLong(stamp.tick());
            for (long bits : stamp.slots()) {
                out.writeLong(bits);
            }
        }
    }

    static ExportStamp readStamp(DataInputStream in) throws IOException {
        int present = in.readUnsignedByte();
        if (present == 0) {
            return null;
        }
        if (present != 1) {
            throw TableConfig.invalid("an export stamp flag of " + present);
        }
        long logId = in.readLong();
        long tick = in.readLong();
        if (tick < 0) {
            throw TableConfig.invalid("an export stamp's tick of " + tick);
        }
        long[] slots = new long[Slots.COUNT / 64];
        for (int i = 0; i < slots.length; i++) {
            slots[i] = in.readLong();
        }
        return new ExportStamp(logId, tick, slots);
    }
}
