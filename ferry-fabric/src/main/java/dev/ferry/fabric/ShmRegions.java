package dev.ferry.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.regex.Pattern;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The shm provider's shared-memory regions in {@code /dev/shm}, and the ones dead processes left.
 *
 * <p>shm names an endpoint's region after the process id ({@code <pid>:<uid>:<n>}) and removes it
 * when the endpoint closes; a process killed with SIGKILL (or crashed) leaves its 16 MiB regions
 * behind for good. Process ids say nothing across PID namespaces and are reused, so liveness is
 * told by a lock instead: while a Ferry session owns a region, it holds a shared {@code flock} on
 * it ({@link #claim}) and marks the file as Ferry's with an extended attribute. The kernel drops
 * the lock when the process dies, however it dies. A new shm session removes every region that is
 * marked as Ferry's and whose lock it can take exclusively ({@link #removeDeadRegions}): its
 * owner is gone, in whatever namespace it ran. Unmarked regions belong to other libfabric users
 * and are left alone. ({@code flock} rather than {@code FileChannel.lock}: POSIX record locks
 * are dropped when the process closes any descriptor of the file, as shm does after mapping a
 * peer's region, and peers in one process map each other's.)
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

    private static final int O_RDONLY = 0;
    private static final int O_CLOEXEC = 0x80000;
    private static final int LOCK_SH = 1;
    private static final int LOCK_EX = 2;
    private static final int LOCK_NB = 4;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle OPEN = libc("open", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_INT, JAVA_INT),
            Linker.Option.firstVariadicArg(2));
    private static final MethodHandle CLOSE = libc("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle FLOCK = libc("flock", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle FSETXATTR = libc("fsetxattr",
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_INT));
    private static final MethodHandle FGETXATTR = libc("fgetxattr",
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_LONG));

    private static boolean cleaned;

    private ShmRegions() {
    }

    private static MethodHandle libc(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor, options);
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
        if (!Files.isRegularFile(region, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        int fd = open(region);
        if (fd < 0) {
            return false; // gone already, or not ours to read
        }
        try {
            if (!marked(fd) || flock(fd, LOCK_EX | LOCK_NB) != 0) {
                return false; // another library's region, or its owner is alive
            }
            // Unlinked while holding the lock: no owner can claim it in between.
            return Files.deleteIfExists(region);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot remove the dead shm region " + region + ": " + e.getMessage());
            return false;
        } finally {
            close(fd);
        }
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
     * Claims the region of this process's shm endpoint named {@code address}: a shared lock held
     * until {@link Claim#close}, and the mark. Null if there is no such region file.
     */
    static Claim claim(byte[] address) {
        Path region = regionOf(address);
        return region == null ? null : claim(region);
    }

    /** Claims {@code region}; null if it cannot be opened. */
    static Claim claim(Path region) {
        int fd = open(region);
        if (fd < 0) {
            LOG.log(System.Logger.Level.DEBUG, "cannot open the shm region " + region + " to claim it");
            return null;
        }
        if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
            LOG.log(System.Logger.Level.DEBUG, "cannot lock the shm region " + region);
        }
        mark(fd, region);
        return new Claim(fd);
    }

    /** A region held by this process: its lock goes with {@link #close}. */
    static final class Claim implements AutoCloseable {
        private int fd;

        private Claim(int fd) {
            this.fd = fd;
        }

        /** Releases the lock; call once the region is removed (the endpoint closed). Idempotent. */
        @Override
        public synchronized void close() {
            if (fd >= 0) {
                ShmRegions.close(fd);
                fd = -1;
            }
        }
    }

    private static int open(Path path) {
        try (Arena arena = Arena.ofConfined()) {
            return (int) OPEN.invokeExact(arena.allocateFrom(path.toString()).address(), O_RDONLY | O_CLOEXEC, 0);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static void close(int fd) {
        try {
            int rc = (int) CLOSE.invokeExact(fd);
            assert rc == 0 : "close(" + fd + ")";
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static int flock(int fd, int operation) {
        try {
            return (int) FLOCK.invokeExact(fd, operation);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static void mark(int fd, Path region) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocateFrom("1");
            int rc = (int) FSETXATTR.invokeExact(fd, arena.allocateFrom(MARK).address(), value.address(), 1L, 0);
            if (rc != 0) {
                LOG.log(System.Logger.Level.DEBUG, "cannot mark the shm region " + region
                        + " (no user extended attributes on its file system?): it will not be removed if this process dies");
            }
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static boolean marked(int fd) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(8);
            long n = (long) FGETXATTR.invokeExact(fd, arena.allocateFrom(MARK).address(), value.address(), 8L);
            return n > 0;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
