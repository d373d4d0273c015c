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
        for (boolean slots : new boolean[] {false, true}) {
            Path tmp = Files.createTempDirectory("ferry-checkpoint-seeds");
            try {
                Path checkpoint = CheckpointFuzzTest.writeTemplate(tmp, slots);
                Path manifest = checkpoint.resolve(CheckpointDescriptor.MANIFEST);
                String suffix = slots ? "-slot-table" : "";
                try (Arena arena = Arena.ofConfined()) {
                    byte[] content = CheckpointDescriptor.read(manifest, CheckpointDescriptor.KIND_MANIFEST, null, arena,
                            "seed").toArray(ValueLayout.JAVA_BYTE);
                    write(dir.resolve("manifest-content" + suffix), 1, content);
                    if (!slots) {
                        // Found in review: names that lead out of the checkpoint or that the file
                        // system refuses, and a tensor claimed far larger than its file.
                        byte[] name = utf("d0.dense");
                        write(dir.resolve("manifest-file-outside"), 1, replace(content, name, utf("../d0.dense")));
                        write(dir.resolve("manifest-file-absolute"), 1, replace(content, name, utf("/etc/hostname")));
                        write(dir.resolve("manifest-file-nul"), 1, replace(content, name, utf("d0\0dense")));
                        byte[] tensor = {0, 1, 'd', 0, 0, 0, 3};
                        byte[] huge = {0, 1, 'd', 0x10, 0, 0, 0};
                        write(dir.resolve("manifest-dense-2e28"), 1, replace(content, tensor, huge));
                    }
                }
                if (slots) {
                    continue;
                }
                write(dir.resolve("manifest-file"), 2, Files.readAllBytes(manifest));
                try (var files = Files.list(checkpoint)) {
                    for (Path file : files.toList()) {
                        if (!file.getFileName().toString().equals(CheckpointDescriptor.MANIFEST)) {
                            write(dir.resolve("block-file-" + file.getFileName()), 0, Files.readAllBytes(file));
                        }
                    }
                }
            } finally {
                try (var walk = Files.walk(tmp)) {
                    for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
                        Files.deleteIfExists(p);
                    }
                }
            }
        }
    }

    private static byte[] utf(String text) throws IOException {
        var bytes = new java.io.ByteArrayOutputStream();
        new java.io.DataOutputStream(bytes).writeUTF(text);
        return bytes.toByteArray();
    }

    /** {@code content} with its only occurrence of {@code what} replaced by {@code with}. */
    private static byte[] replace(byte[] content, byte[] what, byte[] with) {
        int at = -1;
        for (int i = 0; i + what.length <= content.length; i++) {
            if (java.util.Arrays.equals(content, i, i + what.length, what, 0, what.length)) {
                if (at >= 0) {
                    throw new IllegalStateException("two occurrences");
                }
                at = i;
            }
        }
        if (at < 0) {
            throw new IllegalStateException("no occurrence");
        }
        byte[] out = new byte[content.length - what.length + with.length];
        System.arraycopy(content, 0, out, 0, at);
        System.arraycopy(with, 0, out, at, with.length);
        System.arraycopy(content, at + what.length, out, at + with.length, content.length - at - what.length);
        return out;
    }

    private static void write(Path file, int mode, byte[] bytes) throws IOException {
        byte[] seed = new byte[1 + bytes.length];
        seed[0] = (byte) mode;
        System.arraycopy(bytes, 0, seed, 1, bytes.length);
        Files.write(file, seed);
    }
}
