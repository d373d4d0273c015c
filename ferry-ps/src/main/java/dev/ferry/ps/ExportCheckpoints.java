package dev.ferry.ps;

import java.io.IOException;
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
                    ExportStamp stamp = Checkpoints.readStamp(candidate);
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

    /**
     * Loads {@code checkpoint} (verifying every file), hands each of its sparse tables and dense
     * tensors (read-only copies, valid only during the call) to the consumers, frees them, and
     * returns its stamp (null if it has none).
     *
     * @throws PsException {@code CHECKPOINT_CORRUPT} or {@code CHECKPOINT_IO}
     */
    public static ExportStamp load(Path checkpoint, PsConfig limits, Consumer<SparseTable> tables,
            Consumer<DenseTensor> tensors) {
        Checkpoints.Loaded loaded = Checkpoints.load(checkpoint, limits, true);
        try {
            loaded.tables().values().forEach(tables);
            loaded.tensors().values().forEach(tensors);
            return loaded.export();
        } finally {
            loaded.close();
        }
    }
}
