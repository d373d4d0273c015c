package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints keep a table's pull format, admission rule and eviction settings (manifest
 * version 2), restore tables with free slots, and still read version 1 checkpoints (a fixture
 * written by the code before).
 */
class CheckpointRulesTest {

    @TempDir
    Path dir;

    @Test
    void everyPullFormatAdmissionRuleAndEvictionRoundTrips() {
        List<TableConfig> configs = new ArrayList<>();
        Admission[] admissions = {Admission.always(), Admission.after(3), Admission.after(7, 1 << 12),
            Admission.probability(0.25), Admission.probability(1)};
        Eviction[] evictions = {Eviction.none(), Eviction.afterIdle(Duration.ofHours(3)),
            Eviction.capacity(5_000, EvictionPolicy.LEAST_RECENTLY_UPDATED, 0.1),
            Eviction.capacity(64, EvictionPolicy.LEAST_FREQUENTLY_USED, 0.5).withTtl(Duration.ofNanos(1)),
            new Eviction(Long.MAX_VALUE, Integer.MAX_VALUE, EvictionPolicy.LEAST_FREQUENTLY_USED, 0)};
        int n = 0;
        for (PullFormat format : PullFormat.values()) {
            for (Admission admission : admissions) {
                for (Eviction eviction : evictions) {
                    long maxRows = Math.max(TableConfig.DEFAULT_MAX_ROWS, eviction.capacity());
                    configs.add(TableConfig.of("t" + n++, 3, Optimizer.adam(0.01)).withMaxRows(maxRows).withShards(2)
                            .withPullFormat(format).withAdmission(admission).withEviction(eviction));
                }
            }
        }
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults())) {
            for (TableConfig c : configs) {
                server.createTable(c);
            }
            server.checkpoint(dir);
        }
        try (ParameterServer restored = ParameterServer.open(PsConfig.defaults(), dir)) {
            for (TableConfig c : configs) {
                assertEquals(c, restored.table(c.name()).config());
            }
            assertNotNull(restored.table("t2").evictor(), "a restored table with eviction evicts");
            assertNull(restored.table("t0").evictor());
        }
        try (ParameterServer serving = ParameterServer.serving(PsConfig.defaults(), dir)) {
            assertEquals(configs.get(7), serving.table("t7").config());
            assertNull(serving.table("t7").evictor(), "serving tables delete nothing");
        }
    }

    @Test
    void aTableWithEvictedRowsRestoresItsLiveRowsOnly() throws IOException {
        AtomicLong clock = new AtomicLong();
        TableConfig config = TableConfig.of("holes", 4, Optimizer.adagrad(0.1)).withShards(4)
                .withInitializer(Initializer.normal(0, 0.1, 5)).evictAfter(Duration.ofSeconds(1));
        SparseTable t = new SparseTable(config, PsConfig.defaults(), false, clock::get);
        try {
            EvictionTest.push(t, EvictionTest.range(0, 3_000), 0.5f);
            clock.set(500_000_000L);
            EvictionTest.push(t, EvictionTest.range(0, 3_000, 3), 0.25f); // every third id stays
            clock.set(1_200_000_000L);
            assertEquals(2_000, t.evictor().runOnce());
            EvictionTest.push(t, EvictionTest.range(10_000, 10_500), 1f); // into free slots
            Checkpoints.write(dir, List.of(t), List.of(), null, 3);
            Path checkpoint;
            try (Stream<Path> all = Files.list(dir)) {
                checkpoint = all.findFirst().orElseThrow();
            }
            Checkpoints.Loaded loaded = Checkpoints.load(checkpoint, PsConfig.defaults(), false);
            try {
                SparseTable back = loaded.tables().get("holes");
                assertEquals(1_500, back.rows());
                assertEquals(config, back.config());
                for (long id = 0; id < 10_500; id++) {
                    byte[] a = t.rawRow(id);
                    byte[] b = back.rawRow(id);
                    if (a == null) {
                        assertNull(b, "id " + id);
                    } else {
                        assertArrayEquals(a, b, "id " + id);
                    }
                }
            } finally {
                loaded.close();
            }
        } finally {
            t.close();
        }
    }

    /** The checkpoint in {@code src/test/resources/checkpoints/v1}, written by the version-1 code. */
    @Test
    void aVersionOneCheckpointLoadsAsF32AlwaysAdmittingAndNeverEvicting() throws IOException {
        Path v1 = Path.of("src/test/resources/checkpoints/v1/checkpoint-00000001");
        assertTrue(Files.isDirectory(v1), v1.toAbsolutePath().toString());
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment manifest = CheckpointDescriptor.read(v1.resolve(CheckpointDescriptor.MANIFEST),
                    CheckpointDescriptor.KIND_MANIFEST, null, arena, "v1");
            assertEquals(1, manifest.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.BIG_ENDIAN), 0),
                    "the fixture is a version 1 manifest");
        }
        TableConfig expected = new TableConfig("old", 4, Optimizer.adagrad(0.1), Initializer.uniform(-0.5, 0.5, 7),
                1000, 2);
        try (ParameterServer restored = ParameterServer.restore(PsConfig.defaults(), v1, false);
                ParameterServer recomputed = ParameterServer.create(PsConfig.defaults())) {
            SparseTable old = restored.table("old");
            assertEquals(expected, old.config());
            assertEquals(PullFormat.F32, old.config().pullFormat());
            assertEquals(Admission.always(), old.config().admission());
            assertEquals(Eviction.none(), old.config().eviction());
            // The same pushes as the code that wrote it: bit-identical rows.
            SparseTable fresh = recomputed.createTable(expected);
            long[] ids = new long[20];
            float[] g = new float[20 * 4];
            for (int i = 0; i < 20; i++) {
                ids[i] = 1000 + 37L * i;
                for (int j = 0; j < 4; j++) {
                    g[i * 4 + j] = (i - 10) * 0.25f + j;
                }
            }
            fresh.apply(ids, 0, 20, MemorySegment.ofArray(g));
            fresh.apply(ids, 0, 10, MemorySegment.ofArray(java.util.Arrays.copyOf(g, 40)));
            assertEquals(20, old.rows());
            for (long id : ids) {
                assertArrayEquals(fresh.rawRow(id), old.rawRow(id), "id " + id);
            }
            // And it writes version 2 from then on, which reads back the same.
            Path again = restored.checkpoint(dir);
            try (ParameterServer twice = ParameterServer.restore(PsConfig.defaults(), again, false)) {
                assertEquals(expected, twice.table("old").config());
                for (long id : ids) {
                    assertArrayEquals(fresh.rawRow(id), twice.table("old").rawRow(id));
                }
            }
        }
    }

    @Test
    void unknownCodesInTheRulesAreCorrupt() throws IOException {
        TableConfig config = TableConfig.of("r", 2, Optimizer.sgd(1)).withShards(1);
        try (ParameterServer server = ParameterServer.create(PsConfig.defaults())) {
            server.createTable(config);
            server.checkpoint(dir);
        }
        Path checkpoint;
        try (Stream<Path> all = Files.list(dir)) {
            checkpoint = all.findFirst().orElseThrow();
        }
        byte[] content;
        try (Arena arena = Arena.ofConfined()) {
            content = CheckpointDescriptor.read(checkpoint.resolve(CheckpointDescriptor.MANIFEST),
                    CheckpointDescriptor.KIND_MANIFEST, null, arena, "m").toArray(ValueLayout.JAVA_BYTE);
        }
        // Offsets of the rules: after version, sequence, export stamp (absent: 1), servers, tables,
        // name, dimension, optimizer (SGD: 1 + 8), initializer (1 + 8 + 8 + 8), maxRows, shards.
        int rules = 4 + 8 + 1 + 4 + 4 + (2 + 1) + 4 + 9 + 25 + 8 + 4;
        String[] names = {"pull format", "admission kind", "eviction policy"};
        int[] at = {rules, rules + 1, rules + 1 + 1 + 4 + 4 + 8 + 8 + 8};
        for (int i = 0; i < at.length; i++) {
            byte[] bad = content.clone();
            bad[at[i]] = 9;
            Path target = dir.resolve("bad" + i).resolve(checkpoint.getFileName());
            Files.createDirectories(target);
            try (Stream<Path> files = Files.list(checkpoint)) {
                for (Path f : files.toList()) {
                    if (!f.getFileName().toString().equals(CheckpointDescriptor.MANIFEST)) {
                        Files.copy(f, target.resolve(f.getFileName()));
                    }
                }
            }
            CheckpointDescriptor.write(target.resolve(CheckpointDescriptor.MANIFEST), CheckpointDescriptor.KIND_MANIFEST,
                    MemorySegment.ofArray(bad));
            PsException e = assertThrows(PsException.class,
                    () -> ParameterServer.restore(PsConfig.defaults(), target, false), names[i]);
            assertEquals(PsException.Code.CHECKPOINT_CORRUPT, e.code(), e.getMessage());
            assertTrue(e.getMessage().contains("unknown"), names[i] + ": " + e.getMessage());
        }
    }
}
