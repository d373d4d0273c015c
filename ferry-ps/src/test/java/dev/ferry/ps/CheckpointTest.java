package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CheckpointTest {

    private static final PsConfig CONFIG = PsConfig.defaults();

    @TempDir
    Path dir;

    private final long[] ids = new SplittableRandom(21).longs(3_000).toArray();

    @Test
    void checkpointThenRestoreGivesBitIdenticalRows() {
        try (ParameterServer server = populated()) {
            train(server, 0, 50);
            server.slotTable(SlotTable.balanced(3).withServerCount(4));
            Path checkpoint = server.checkpoint(dir);
            assertEquals("checkpoint-00000001", checkpoint.getFileName().toString());
            try (ParameterServer restored = ParameterServer.open(CONFIG, dir)) {
                assertEquals(checkpoint, restored.restoredFrom().orElseThrow());
                assertTrue(restored.rejectedCheckpoints().isEmpty());
                assertSameState(server, restored);
                assertEquals(server.slotTable(), restored.slotTable());
                // The optimizer state came back too: the same pushes keep them identical.
                train(server, 50, 20);
                train(restored, 50, 20);
                assertSameState(server, restored);
            }
        }
    }

    @Test
    void checkpointsTakenWhilePushingAreConsistentPerRow() throws Exception {
        try (ParameterServer server = ParameterServer.create(CONFIG)) {
            SparseTable table = server.createTable(TableConfig.of("sgd", 8, Optimizer.sgd(1)).withShards(4));
            AtomicBoolean running = new AtomicBoolean(true);
            AtomicReference<Throwable> failure = new AtomicReference<>();
            List<Thread> pushers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int thread = t;
                pushers.add(Thread.ofPlatform().start(() -> {
                    SplittableRandom random = new SplittableRandom(thread);
                    try (Arena arena = Arena.ofConfined()) {
                        MemorySegment g = arena.allocate(32L * 8 * 4);
                        long[] batch = new long[32];
                        while (running.get()) {
                            for (int i = 0; i < 32; i++) {
                                batch[i] = ids[random.nextInt(ids.length)];
                                float v = (float) random.nextDouble(-1, 1);
                                for (int j = 0; j < 8; j++) {
                                    g.set(RowLayout.FLOAT, (i * 8L + j) * 4, v);
                                }
                            }
                            table.apply(batch, 0, 32, g);
                        }
                    } catch (Throwable e) {
                        failure.set(e);
                    }
                }));
            }
            List<Path> checkpoints = new ArrayList<>();
            for (int c = 0; c < 3; c++) {
                Thread.sleep(30);
                checkpoints.add(server.checkpoint(dir));
            }
            running.set(false);
            for (Thread t : pushers) {
                t.join();
            }
            assertEquals(null, failure.get());
            for (Path checkpoint : checkpoints) {
                try (ParameterServer restored = ParameterServer.restore(CONFIG, checkpoint, false)) {
                    SparseTable copy = restored.table("sgd");
                    assertTrue(copy.rows() > 0);
                    for (long id : ids) {
                        byte[] raw = copy.rawRow(id);
                        if (raw != null) {
                            MemorySegment row = MemorySegment.ofArray(raw);
                            float first = row.get(RowLayout.FLOAT, RowLayout.weight(0));
                            for (int j = 1; j < 8; j++) {
                                assertEquals(first, row.get(RowLayout.FLOAT, RowLayout.weight(j)), "torn row " + id);
                            }
                        }
                    }
                }
            }
        }
    }

    @Test
    void aCorruptNewestCheckpointIsRefusedAndThePreviousGoodOneIsUsed() throws IOException {
        Map<Long, byte[]> atFirst = new HashMap<>();
        Path first;
        Path second;
        try (ParameterServer server = populated()) {
            train(server, 0, 10);
            first = server.checkpoint(dir);
            for (long id : ids) {
                atFirst.put(id, server.table("adam").rawRow(id));
            }
            train(server, 10, 10);
            second = server.checkpoint(dir);
        }
        Path victim = largestRowsFile(second);
        flipByte(victim, Files.size(victim) / 2);

        PsException e = assertThrows(PsException.class, () -> ParameterServer.restore(CONFIG, second, false));
        assertEquals(PsException.Code.CHECKPOINT_CORRUPT, e.code());
        assertTrue(e.getMessage().contains(victim.getFileName().toString()) && e.getMessage().contains("CRC32C"),
                e.getMessage());
        System.out.println(e.getMessage());

        try (ParameterServer restored = ParameterServer.open(CONFIG, dir)) {
            assertEquals(first, restored.restoredFrom().orElseThrow());
            assertEquals(1, restored.rejectedCheckpoints().size());
            assertTrue(restored.rejectedCheckpoints().get(0).contains(second.getFileName().toString()));
            for (long id : ids) {
                assertArrayEquals(atFirst.get(id), restored.table("adam").rawRow(id));
            }
            // The next checkpoint takes a new number and keeps both older ones.
            Path third = restored.checkpoint(dir);
            assertEquals("checkpoint-00000003", third.getFileName().toString());
        }
        assertTrue(Files.isDirectory(first) && Files.isDirectory(second), "nothing good (or evidence) is deleted");
        try (ParameterServer serving = ParameterServer.serving(CONFIG, dir)) {
            assertTrue(serving.readOnly());
        }
    }

    @Test
    void truncatedMissingOrAlteredFilesAreRefusedWithTheReason() throws IOException {
        Path good;
        try (ParameterServer server = populated()) {
            train(server, 0, 5);
            good = server.checkpoint(dir.resolve("source"));
        }
        Path rows = largestRowsFile(good);
        String rowsName = rows.getFileName().toString();
        refused(good, "truncated", c -> truncate(c.resolve(rowsName), 100), rowsName + ": truncated");
        refused(good, "tail", c -> truncate(c.resolve(rowsName), 3), rowsName + ": truncated");
        refused(good, "manifest", c -> truncate(c.resolve("MANIFEST"), 40), "MANIFEST");
        refused(good, "missing", c -> delete(c.resolve(rowsName)), rowsName + ": missing");
        refused(good, "swapped", c -> {
            try {
                Files.copy(c.resolve("d0.dense"), c.resolve(rowsName), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        }, rowsName);
        refused(good, "header", c -> flip(c.resolve(rowsName), 0), rowsName);
        // A manifest whose only block is altered.
        refused(good, "manifestBits", c -> flip(c.resolve("MANIFEST"), 30), "MANIFEST: block 0");
    }

    @Test
    void aCrashedWriteIsIgnoredAndOldCheckpointsArePruned() throws IOException {
        Path junk = Files.createDirectories(dir.resolve("checkpoint-00000005.tmp"));
        Files.writeString(junk.resolve("MANIFEST"), "half written");
        Files.writeString(dir.resolve("notes.txt"), "not a checkpoint");
        try (ParameterServer server = ParameterServer.open(CONFIG, dir)) {
            assertTrue(server.restoredFrom().isEmpty(), "a temporary directory is never restored");
            server.createTable(TableConfig.of("t", 2, Optimizer.sgd(1)));
            List<Path> made = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                made.add(server.checkpoint(dir));
            }
            assertEquals("checkpoint-00000006", made.get(0).getFileName().toString());
            assertFalse(Files.exists(junk));
            assertFalse(Files.exists(made.get(0)), "only the newest " + CONFIG.checkpointsKept() + " are kept");
            for (int i = 1; i < 4; i++) {
                assertTrue(Files.isDirectory(made.get(i)));
            }
        }
        assertTrue(Files.exists(dir.resolve("notes.txt")));
    }

    @Test
    void aFailedWriteReportsAnIoErrorAndKeepsTheEarlierCheckpoints() throws IOException {
        try (ParameterServer server = populated()) {
            train(server, 0, 2);
            Path first = server.checkpoint(dir);
            Path notADirectory = Files.writeString(dir.resolve("plain-file"), "x");
            PsException e = assertThrows(PsException.class, () -> server.checkpoint(notADirectory));
            assertEquals(PsException.Code.CHECKPOINT_IO, e.code());
            train(server, 2, 2);
            for (String failAt : List.of("t2-s3.rows", "d0.dense", "MANIFEST")) {
                Checkpoints.writeFault = file -> {
                    if (file.getFileName().toString().equals(failAt)) {
                        throw new IOException("injected: disk full after " + failAt);
                    }
                };
                try {
                    e = assertThrows(PsException.class, () -> server.checkpoint(dir));
                } finally {
                    Checkpoints.writeFault = file -> { };
                }
                assertEquals(PsException.Code.CHECKPOINT_IO, e.code(), e.getMessage());
                assertTrue(e.getMessage().contains("injected"), e.getMessage());
                try (Stream<Path> entries = Files.list(dir)) {
                    assertEquals(List.of(first.getFileName().toString(), "plain-file"),
                            entries.map(p -> p.getFileName().toString()).sorted().toList(), "no half checkpoint left");
                }
            }
            try (ParameterServer restored = ParameterServer.open(CONFIG, dir)) {
                assertEquals(first, restored.restoredFrom().orElseThrow());
            }
            assertEquals("checkpoint-00000002", server.checkpoint(dir).getFileName().toString());
        }
    }

    @Test
    void servingModeLoadsACheckpointAndRejectsPushes() {
        Initializer init = Initializer.uniform(-1, 1, 4);
        try (ParameterServer server = populated()) {
            train(server, 0, 5);
            server.checkpoint(dir);
        }
        PsException none = assertThrows(PsException.class, () -> ParameterServer.serving(CONFIG, dir.resolve("empty")));
        assertEquals(PsException.Code.NO_CHECKPOINT, none.code());
        try (ParameterServer serving = ParameterServer.serving(CONFIG, dir); Arena arena = Arena.ofConfined()) {
            SparseTable table = serving.table("adam");
            long rows = table.rows();
            MemorySegment g = arena.allocate(7 * 4);
            for (PsException e : List.of(
                    assertThrows(PsException.class, () -> serving.push("adam", 7, ids, 0, 1, g)),
                    assertThrows(PsException.class, () -> table.apply(ids, 0, 1, g)),
                    assertThrows(PsException.class, () -> serving.dense("bias").apply(arena.allocate(33 * 4))),
                    assertThrows(PsException.class,
                            () -> serving.createTable(TableConfig.of("new", 1, Optimizer.sgd(1)))))) {
                assertEquals(PsException.Code.READ_ONLY, e.code());
                assertTrue(e.getMessage().contains("read-only"), e.getMessage());
            }
            MemorySegment out = arena.allocate(2 * 7 * 4);
            long unseen = 123_456_789L;
            long seen = java.util.Arrays.stream(ids).filter(id -> table.rawRow(id) != null).findFirst().orElseThrow();
            table.gather(new long[] {seen, unseen}, 0, 2, out);
            MemorySegment stored = MemorySegment.ofArray(table.rawRow(seen));
            for (int j = 0; j < 7; j++) {
                assertEquals(stored.get(RowLayout.FLOAT, RowLayout.weight(j)), out.get(RowLayout.FLOAT, 4L * j));
                assertEquals(init.valueAt(unseen, j), out.get(RowLayout.FLOAT, 28 + 4L * j));
            }
            assertEquals(rows, table.rows(), "serving never stores rows");
            assertEquals(null, table.rawRow(unseen));
        }
    }

    /** A server with an Adam table, an FTRL table, an empty table and a dense tensor. */
    private static ParameterServer populated() {
        ParameterServer server = ParameterServer.create(CONFIG);
        server.createTable(TableConfig.of("adam", 7, Optimizer.adam(0.01))
                .withInitializer(Initializer.uniform(-1, 1, 4)).withShards(4));
        server.createTable(TableConfig.of("ftrl", 3, new Optimizer.Ftrl(0.1, 1, 0.01, 0.01)));
        server.createTable(TableConfig.of("empty", 5, Optimizer.sgd(1)).withShards(2));
        server.createDense(new DenseConfig("bias", 33, Optimizer.adagrad(0.1), Initializer.normal(0, 1, 2)));
        return server;
    }

    /** Deterministic pushes {@code [from, from + n)} to the populated tables. */
    private void train(ParameterServer server, int from, int n) {
        try (Arena arena = Arena.ofConfined()) {
            for (int step = from; step < from + n; step++) {
                SplittableRandom random = new SplittableRandom(step);
                long[] batch = new long[200];
                for (int i = 0; i < batch.length; i++) {
                    batch[i] = ids[random.nextInt(ids.length)];
                }
                MemorySegment g7 = arena.allocate(200 * 7 * 4);
                MemorySegment g3 = arena.allocate(200 * 3 * 4);
                MemorySegment g33 = arena.allocate(33 * 4);
                fill(g7, random);
                fill(g3, random);
                fill(g33, random);
                server.push("adam", 7, batch, 0, batch.length, g7);
                server.push("ftrl", 3, batch, 0, batch.length, g3);
                server.dense("bias").apply(g33);
            }
        }
    }

    private static void fill(MemorySegment segment, SplittableRandom random) {
        for (long at = 0; at < segment.byteSize(); at += 4) {
            segment.set(RowLayout.FLOAT, at, (float) random.nextDouble(-1, 1));
        }
    }

    private void assertSameState(ParameterServer expected, ParameterServer actual) {
        for (String name : List.of("adam", "ftrl", "empty")) {
            SparseTable a = expected.table(name);
            SparseTable b = actual.table(name);
            assertEquals(a.config(), b.config());
            assertEquals(a.rows(), b.rows());
            for (long id : ids) {
                assertArrayEquals(a.rawRow(id), b.rawRow(id), name + " id " + id);
            }
        }
        assertTrue(expected.table("adam").rows() > 1_000);
        assertEquals(expected.dense("bias").config(), actual.dense("bias").config());
        assertArrayEquals(expected.dense("bias").rawRow(), actual.dense("bias").rawRow());
        assertEquals(expected.stats().stream().map(s -> s.rows() + "/" + s.bytesPerRow()).toList(),
                actual.stats().stream().map(s -> s.rows() + "/" + s.bytesPerRow()).toList());
    }

    /** Copies a good checkpoint, damages the copy, and expects a refusal that says {@code reason}. */
    private void refused(Path good, String name, Consumer<Path> damage, String reason) throws IOException {
        Path copyDir = dir.resolve(name);
        Path copy = copyDir.resolve("checkpoint-00000001");
        Files.createDirectories(copy);
        try (Stream<Path> files = Files.list(good)) {
            for (Path f : files.toList()) {
                Files.copy(f, copy.resolve(f.getFileName()));
            }
        }
        damage.accept(copy);
        PsException e = assertThrows(PsException.class, () -> ParameterServer.restore(CONFIG, copy, false), name);
        assertEquals(PsException.Code.CHECKPOINT_CORRUPT, e.code(), e.getMessage());
        assertTrue(e.getMessage().contains(reason), name + ": '" + e.getMessage() + "' should say " + reason);
        PsException all = assertThrows(PsException.class, () -> ParameterServer.open(CONFIG, copyDir));
        assertEquals(PsException.Code.CHECKPOINT_CORRUPT, all.code());
        System.out.println(name + ": " + e.getMessage());
    }

    private static Path largestRowsFile(Path checkpoint) throws IOException {
        try (Stream<Path> files = Files.list(checkpoint)) {
            return files.filter(p -> p.toString().endsWith(".rows"))
                    .max(Comparator.comparingLong(p -> p.toFile().length())).orElseThrow();
        }
    }

    private static void truncate(Path file, long by) {
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.setLength(f.length() - by);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static void delete(Path file) {
        try {
            Files.delete(file);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static void flip(Path file, long at) {
        try {
            flipByte(file, at);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    private static void flipByte(Path file, long at) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.seek(at);
            int b = f.read();
            f.seek(at);
            f.write(b ^ 0x40);
        }
    }
}
