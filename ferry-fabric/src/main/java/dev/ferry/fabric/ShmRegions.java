package dev.ferry.fabric;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Stale shared-memory regions of the shm provider. shm names an endpoint's region in
 * {@code /dev/shm} after the process id ({@code <pid>:<n>:<n>}) and removes it when the endpoint
 * closes; a process killed with SIGKILL leaves its regions behind. Process ids are reused, and a
 * new process whose id matches a stale region cannot enable its endpoint (EBUSY). Before this
 * process opens its first shm endpoint, any region named after its own id is such a leftover:
 * it is removed.
 */
final class ShmRegions {

    private static final Path DIRECTORY = Path.of("/dev/shm");
    private static boolean cleaned;

    private ShmRegions() {
    }

    /** Removes regions named after this process's id, once per process; returns how many. */
    static synchronized int removeOwnLeftovers() {
        if (cleaned) {
            return 0;
        }
        cleaned = true;
        return removeLeftovers(DIRECTORY, ProcessHandle.current().pid());
    }

    /** Removes the files in {@code directory} named {@code <pid>:...}; returns how many. */
    static int removeLeftovers(Path directory, long pid) {
        if (!Files.isDirectory(directory)) {
            return 0;
        }
        int removed = 0;
        try (DirectoryStream<Path> regions = Files.newDirectoryStream(directory, pid + ":*")) {
            for (Path region : regions) {
                try {
                    Files.deleteIfExists(region);
                    removed++;
                } catch (IOException e) {
                    System.getLogger("dev.ferry.fabric").log(System.Logger.Level.WARNING,
                            "cannot remove the stale shm region " + region + ": " + e.getMessage());
                }
            }
        } catch (IOException e) {
            System.getLogger("dev.ferry.fabric").log(System.Logger.Level.WARNING,
                    "cannot list " + directory + ": " + e.getMessage());
        }
        return removed;
    }
}
