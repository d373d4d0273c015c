package dev.ferry.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Proof that the process owning a file (an shm region, a doorbell in {@code /dev/shm}) still
 * runs: the owner holds a shared {@code flock} on the file for as long as it uses it; the kernel
 * drops the lock when the process dies, however it dies. Another process that can take the lock
 * exclusively knows the owner is gone, in whatever PID namespace it ran, whatever its id became.
 * ({@code flock} rather than {@code FileChannel.lock}: POSIX record locks are released when the
 * process closes any descriptor of the file, as libfabric's shm does after mapping a peer's
 * region, and peers in one process map each other's files.)
 */
public final class OwnerLock implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.fabric");
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

    private int fd;

    private OwnerLock(int fd) {
        this.fd = fd;
    }

    private static MethodHandle libc(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor, options);
    }

    /**
     * Holds {@code file} for this process until {@link #close}, marking it with the extended
     * attribute {@code mark} first if not null. Null if the file cannot be opened or locked.
     */
    public static OwnerLock hold(Path file, String mark) {
        int fd = open(file);
        if (fd < 0) {
            LOG.log(System.Logger.Level.DEBUG, "cannot open " + file + " to hold it");
            return null;
        }
        if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
            LOG.log(System.Logger.Level.DEBUG, "cannot lock " + file);
            close(fd);
            return null;
        }
        if (mark != null && !setMark(fd, mark)) {
            LOG.log(System.Logger.Level.DEBUG, "cannot mark " + file + " with " + mark
                    + " (no user extended attributes on its file system?)");
        }
        return new OwnerLock(fd);
    }

    /**
     * Deletes {@code file} if no live process holds it, and, when {@code mark} is not null, it
     * carries that mark (files without it are not ours to judge). Returns whether it deleted it.
     */
    public static boolean deleteIfUnheld(Path file, String mark) {
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        int fd = open(file);
        if (fd < 0) {
            return false; // gone already, or not ours to read
        }
        try {
            if ((mark != null && !hasMark(fd, mark)) || flock(fd, LOCK_EX | LOCK_NB) != 0) {
                return false;
            }
            // Deleted while this process holds the lock: no owner can take the file in between.
            return Files.deleteIfExists(file);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.WARNING, "cannot delete " + file + ": " + e.getMessage());
            return false;
        } finally {
            close(fd);
        }
    }

    /**
     * Whether the process that held {@code file} is gone: the file was removed, or it carries
     * {@code mark} and no live process holds it (the kernel dropped the dead owner's lock).
     * False while it is held, and for files without the mark (not ours to judge).
     */
    public static boolean isGone(Path file, String mark) {
        if (!Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
            return true;
        }
        int fd = open(file);
        if (fd < 0) {
            return !Files.exists(file, LinkOption.NOFOLLOW_LINKS);
        }
        try {
            return hasMark(fd, mark) && flock(fd, LOCK_EX | LOCK_NB) == 0;
        } finally {
            close(fd); // drops the exclusive lock if it was taken
        }
    }

    /** Whether {@code file} carries the extended attribute {@code mark}. */
    public static boolean isMarked(Path file, String mark) {
        int fd = open(file);
        if (fd < 0) {
            return false;
        }
        try {
            return hasMark(fd, mark);
        } finally {
            close(fd);
        }
    }

    /** Releases the file: call once it is deleted or no longer used. Idempotent. */
    @Override
    public synchronized void close() {
        if (fd >= 0) {
            close(fd);
            fd = -1;
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

    private static boolean setMark(int fd, String mark) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocateFrom("1");
            return (int) FSETXATTR.invokeExact(fd, arena.allocateFrom(mark).address(), value.address(), 1L, 0) == 0;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    private static boolean hasMark(int fd, String mark) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment value = arena.allocate(8);
            return (long) FGETXATTR.invokeExact(fd, arena.allocateFrom(mark).address(), value.address(), 8L) > 0;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
