package dev.ferry.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.code_intelligence.jazzer.junit.FuzzTest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.stream.Stream;
import java.util.zip.CRC32C;

/**
 * Fuzzes the reading of checkpoints: block files ({@link CheckpointDescriptor#read}) and the
 * manifest ({@link Checkpoints#load}). The first byte picks what the rest is:
 * <ol start="0">
 *   <li>a whole block file, read as a file of rows;</li>
 *   <li>the manifest's content, written as a well-formed MANIFEST (so the fuzzer works on the
 *       record, not on CRCs) into a real checkpoint whose shard and tensor files it may name;</li>
 *   <li>a whole MANIFEST file, as found on disk.</li>
 * </ol>
 * Whatever the bytes, reading returns a checkpoint (closed again here) or throws
 * {@link PsException} {@code CHECKPOINT_CORRUPT}: never another exception, never a read
 * outside the checkpoint's directory, never memory beyond what the files themselves hold.
 */
class CheckpointFuzzTest {

    static final PsConfig LIMITS = PsConfig.defaults();
    private static Path root;
    private static Path checkpoint;

    @FuzzTest
    void checkpoint(byte[] data) throws IOException {
        if (data.length == 0) {
            return;
        }
        Path dir = template();
        byte[] rest = Arrays.copyOfRange(data, 1, data.length);
        switch ((data[0] & 0xff) % 3) {
            case 0 -> blockFile(dir, rest);
            case 1 -> {
                Files.write(dir.resolve(CheckpointDescriptor.MANIFEST), blockFile(CheckpointDescriptor.KIND_MANIFEST, rest));
                load(dir);
            }
            default -> {
                Files.write(dir.resolve(CheckpointDescriptor.MANIFEST), rest);
                load(dir);
            }
        }
    }

    /**
     * {@code content} as a block file, laid out as {@link CheckpointDescriptor#write} lays it
     * out, without forcing it to disk (which would cost the fuzzer milliseconds a run).
     */
    static byte[] blockFile(int kind, byte[] content) {
        int blocks = (content.length + CheckpointDescriptor.MAX_BLOCK_BYTES - 1) / CheckpointDescriptor.MAX_BLOCK_BYTES;
        ByteBuffer out = ByteBuffer.allocate(CheckpointDescriptor.HEADER_BYTES
                + blocks * CheckpointDescriptor.BLOCK_HEADER_BYTES + content.length + CheckpointDescriptor.BLOCK_HEADER_BYTES)
                .order(ByteOrder.LITTLE_ENDIAN);
        out.putLong(CheckpointDescriptor.MAGIC).putInt(CheckpointDescriptor.VERSION).putInt(kind);
        for (int at = 0; at < content.length; at += CheckpointDescriptor.MAX_BLOCK_BYTES) {
            int length = Math.min(CheckpointDescriptor.MAX_BLOCK_BYTES, content.length - at);
            CRC32C crc = new CRC32C();
            crc.update(content, at, length);
            out.putInt(length).putInt((int) crc.getValue()).put(content, at, length);
        }
        out.putInt(0).putInt(blocks);
        return out.array();
    }

    private static void blockFile(Path dir, byte[] bytes) throws IOException {
        Path file = dir.resolve("fuzz.rows");
        Files.write(file, bytes);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment content = CheckpointDescriptor.read(file, CheckpointDescriptor.KIND_ROWS, null, arena, "fuzz");
            assertTrue(content.byteSize() <= bytes.length - CheckpointDescriptor.HEADER_BYTES);
        } catch (PsException e) {
            assertEquals(PsException.Code.CHECKPOINT_CORRUPT, e.code(), e::toString);
        }
    }

    private static void load(Path dir) {
        try {
            Checkpoints.load(dir, LIMITS, false).close();
        } catch (PsException e) {
            if (e.code() != PsException.Code.CHECKPOINT_CORRUPT) {
                throw new AssertionError("a corrupt manifest reported as " + e.code(), e);
            }
        }
    }

    /** The directory of a real checkpoint (see {@link #writeTemplate}), made once per JVM. */
    private static synchronized Path template() throws IOException {
        if (checkpoint == null) {
            root = Files.createTempDirectory("ferry-checkpoint-fuzz");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(root)));
            checkpoint = writeTemplate(root, false);
        }
        return checkpoint;
    }

    /**
     * Writes the same small checkpoint every time: a sparse table of two shards with a few rows,
     * a dense tensor and, with {@code slots}, a slot table (256 KiB of manifest: the fuzzer's
     * own copy has none, so that its inputs stay small). The seeds of mode 1 are its manifest's
     * content; the shard and tensor files are the same either way.
     */
    static Path writeTemplate(Path directory, boolean slots) {
        try (ParameterServer ps = ParameterServer.create(LIMITS)) {
            if (slots) {
                ps.slotTable(SlotTable.balanced(2));
            }
            ps.createTable(new TableConfig("t", 2, new Optimizer.Adagrad(0.1, 0.1, 1e-8), Initializer.zeros(), 64, 2));
            ps.createDense(new DenseConfig("d", 3, new Optimizer.Sgd(0.5), Initializer.zeros()));
            long[] ids = {1, 2, 3, 40};
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment gradients = arena.allocate(ids.length * 2L * Float.BYTES);
                for (int i = 0; i < ids.length * 2; i++) {
                    gradients.setAtIndex(java.lang.foreign.ValueLayout.JAVA_FLOAT, i, i + 1);
                }
                ps.push("t", 2, ids, 0, ids.length, gradients);
            }
            return ps.checkpoint(directory);
        }
    }

    private static void deleteTree(Path tree) {
        try (Stream<Path> walk = Files.walk(tree)) {
            for (Path p : walk.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
