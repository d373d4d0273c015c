package dev.ferry.fabric;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;

/**
 * The shm provider's shared-memory regions in {@code /dev/shm}, and the ones dead processes left.
 *
 * <p>shm names an endpoint's region after the process id ({@code <pid>:<uid>:<n>}) and removes it
 * when the endpoint closes; a process killed with SIGKILL (or crashed) leaves its 16 MiB regions
 * behind for good. Process ids say nothing across PID namespaces and are reused, so liveness is
 * told by a lock instead: while a Ferry session owns a region, it holds a shared {@code flock} on
 * it ({@link #claim}, an {@link OwnerLock}) and marks the file as Ferry's with an extended
 * attribute. The kernel drops the lock when the process dies, however it dies. A new shm session
 * removes every region that is marked as Ferry's and whose lock it can take exclusively
 * ({@link #removeDeadRegions}): its owner is gone, in whatever namespace it ran. Unmarked regions belong to other libfabric users
 * and are left alone.
 *
 * <p>Before this process opens its first shm endpoint, any region named after its own id is a
 * leftover of an earlier process with the same id, which would make the new endpoint fail
 * (EBUSY): it is removed too.
 */
final class ShmRegions {

    private static final System.Logger LOG = System.getLogger("dev.ferry.fabric");
    static final Path DIRECTORY = Path.of("/dev/shm");
    /** shm's region names: {@code <pid>:<uid>:<endpoint index>}. */
    private static final Pattern REGION = Pattern.compile("[0-9]+:[0-9]+:[0-9]+");
    private static final String PREFIX = "fi_shm://";
    /** The extended attribute that marks a region as a Ferry session's. */
    static final String MARK = "user.ferry.region";

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
                    LOG.log(System.Logger.Level.WARNING, "cannot remove the stale shm region " + region + ": " + e.getMessage());
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot list " + directory + ": " + e.getMessage());
        }
        return removed;
    }

    /**
     * Removes the regions in {@code directory} that a Ferry session marked and that no live
     * process holds; returns how many.
     */
    static int removeDeadRegions(Path directory) {
        if (!Files.isDirectory(directory)) {
            return 0;
        }
        int removed = 0;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(directory,
                p -> REGION.matcher(p.getFileName().toString()).matches())) {
            for (Path region : files) {
                if (removeIfDead(region)) {
                    removed++;
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot list " + directory + ": " + e.getMessage());
        }
        if (removed > 0) {
            LOG.log(System.Logger.Level.INFO, "removed " + removed + " shm region(s) of processes that no longer run");
        }
        return removed;
    }

    private static boolean removeIfDead(Path region) {
        return OwnerLock.deleteIfUnheld(region, MARK);
    }

    /**
     * The region file of an shm endpoint whose {@link Endpoint#name()} is {@code address}, or null
     * if the name is not a region's.
     */
    static Path regionOf(byte[] address) {
        String name = new String(address, StandardCharsets.UTF_8);
        int nul = name.indexOf('\0');
        name = nul < 0 ? name : name.substring(0, nul);
        if (name.startsWith(PREFIX)) {
            name = name.substring(PREFIX.length());
        }
        return REGION.matcher(name).matches() ? DIRECTORY.resolve(name) : null;
    }

    /**
     * Claims the region of this process's shm endpoint named {@code address}: held (and marked)
     * until the returned lock is closed. Null if there is no such region file.
     */
    static OwnerLock claim(byte[] address) {
        Path region = regionOf(address);
        return region == null ? null : claim(region);
    }

    /** Claims {@code region}; null if it cannot be opened. */
    static OwnerLock claim(Path region) {
        return OwnerLock.hold(region, MARK);
    }
}
