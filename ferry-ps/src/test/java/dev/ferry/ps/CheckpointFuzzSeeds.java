package dev.ferry.ps;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Writes the seed inputs of {@link CheckpointFuzzTest} from a checkpoint written by
 * {@link Checkpoints#write} (run from the module directory; see docs/fuzzing.md): a shard file
 * (mode 0), the manifest's content (mode 1) and the whole MANIFEST file (mode 2).
 */
public final class CheckpointFuzzSeeds {

    private CheckpointFuzzSeeds() {
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "src/test/resources/dev/ferry/ps/CheckpointFuzzTestInputs/checkpoint");
        Files.createDirectories(dir);
        Path tmp = Files.createTempDirectory("ferry-checkpoint-seeds");
        try {
            Path checkpoint = CheckpointFuzzTest.writeTemplate(tmp);
            Path manifest = checkpoint.resolve(CheckpointDescriptor.MANIFEST);
            try (var files = Files.list(checkpoint)) {
                for (Path file : files.toList()) {
                    if (file.getFileName().toString().endsWith(".rows")) {
                        write(dir.resolve("rows-" + file.getFileName()), 0, Files.readAllBytes(file));
                    }
                }
            }
            try (Arena arena = Arena.ofConfined()) {
                byte[] content = CheckpointDescriptor.read(manifest, CheckpointDescriptor.KIND_MANIFEST, null, arena,
                        "seed").toArray(ValueLayout.JAVA_BYTE);
                write(dir.resolve("manifest-content"), 1, content);
            }
            write(dir.resolve("manifest-file"), 2, Files.readAllBytes(manifest));
        } finally {
            try (var walk = Files.walk(tmp)) {
                for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    private static void write(Path file, int mode, byte[] bytes) throws IOException {
        byte[] seed = new byte[1 + bytes.length];
        seed[0] = (byte) mode;
        System.arraycopy(bytes, 0, seed, 1, bytes.length);
        Files.write(file, seed);
    }
}
