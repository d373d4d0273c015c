package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.RandomAccessFile;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ExportCheckpoints#stream}: a checkpoint's rows handed one verified shard file at a time
 * (every row exactly once, byte for byte as the table stores it), its tensors, nothing when the
 * stamp is refused, and a corrupt shard file failing the call after the files before it.
 */
class CheckpointStreamTest {

    @TempDir
    Path dir;

    private static final ExportStamp STAMP = new ExportStamp(42, 7, new long[Slots.COUNT / 64]);

    private Path checkpointOf(ParameterServer ps) {
        ps.exportStamp(() -> STAMP);
        ps.createTable(TableConfig.of("t", 4, Optimizer.adagrad(0.1)));
        ps.createDense(new DenseConfig("d", 8, Optimizer.sgd(1), Initializer.zeros()));
        long[] ids = new long[3_000];
        for (int i = 0; i < ids.length; i++) {
            ids[i] = i * 13L - 700;
        }
        float[] g = new float[ids.length * 4];
        java.util.Arrays.fill(g, 0.5f);
        ps.push("t", 4, ids, 0, ids.length, MemorySegment.ofArray(g));
        return ps.checkpoint(dir);
    }

    @Test
    void everyRowOnceOneShardFileAtATime() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            Path checkpoint = checkpointOf(ps);
            TreeMap<Long, byte[]> stored = ExportRows.of(ps.table("t"));
            TreeMap<Long, byte[]> handed = new TreeMap<>();
            List<Long> perCall = new ArrayList<>();
            List<String> tensors = new ArrayList<>();
            long rowBytes = ps.table("t").rowBytes();
            ExportStamp stamp = ExportCheckpoints.stream(checkpoint, PsConfig.defaults(), s -> true, (config, rows) -> {
                assertEquals("t", config.name());
                perCall.add(rows.byteSize() / rowBytes);
                for (long at = 0; at < rows.byteSize(); at += rowBytes) {
                    byte[] row = rows.asSlice(at, rowBytes).toArray(ValueLayout.JAVA_BYTE);
                    assertNull(handed.put(RowTransfer.idOf(rows, at), row), "a row handed twice");
                }
            }, tensor -> tensors.add(tensor.name() + ":" + tensor.config().length()));
            assertEquals(STAMP.tick(), stamp.tick());
            assertEquals(ps.table("t").config().shards(), perCall.size(), "one call per shard file: " + perCall);
            assertEquals(stored.keySet(), handed.keySet());
            stored.forEach((id, row) -> assertTrue(java.util.Arrays.equals(row, handed.get(id)), "row " + id));
            assertEquals(List.of("d:8"), tensors);
        }
    }

    @Test
    void aRefusedStampHandsNothing() {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            Path checkpoint = checkpointOf(ps);
            int[] calls = {0};
            ExportStamp stamp = ExportCheckpoints.stream(checkpoint, PsConfig.defaults(), s -> s.tick() == 8,
                    (config, rows) -> calls[0]++, tensor -> calls[0]++);
            assertEquals(7, stamp.tick());
            assertEquals(0, calls[0]);
        }
    }

    @Test
    void aCorruptShardFileFailsAfterTheFilesBeforeIt() throws Exception {
        try (ParameterServer ps = ParameterServer.create(PsConfig.defaults())) {
            Path checkpoint = checkpointOf(ps);
            List<Path> files;
            try (Stream<Path> list = Files.list(checkpoint)) {
                files = list.filter(p -> p.getFileName().toString().endsWith(".rows")).sorted().toList();
            }
            assertTrue(files.size() > 2, files.toString());
            // The last shard in the manifest's order (t0-s0, t0-s1, ...): every other one is handed first.
            int shards = ps.table("t").config().shards();
            Path victim = checkpoint.resolve("t0-s" + (shards - 1) + ".rows");
            assertTrue(files.contains(victim), files.toString());
            try (RandomAccessFile f = new RandomAccessFile(victim.toFile(), "rw")) {
                f.seek(f.length() - 1);
                int b = f.read();
                f.seek(f.length() - 1);
                f.write(b ^ 0x40);
            }
            List<Long> handed = new ArrayList<>();
            PsException e = assertThrows(PsException.class, () -> ExportCheckpoints.stream(checkpoint,
                    PsConfig.defaults(), s -> true, (config, rows) -> handed.add(rows.byteSize()), tensor -> { }));
            assertEquals(PsException.Code.CHECKPOINT_CORRUPT, e.code());
            assertTrue(e.getMessage().contains(victim.getFileName().toString()), e.getMessage());
            assertEquals(shards - 1, handed.size(), "the shard files before the corrupt one, each whole");
        }
    }
}
