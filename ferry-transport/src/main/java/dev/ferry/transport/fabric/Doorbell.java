package dev.ferry.transport.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import dev.ferry.fabric.OwnerLock;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A wake-up word in shared memory, for providers whose completion queue cannot sleep (shm): only
 * polling notices a completion there, so a progress thread that sleeps would notice a message
 * only when it next wakes. Before sleeping, the progress thread {@link #arm arms} its doorbell
 * (the word says "asleep"), polls once more, and waits on the word with a futex; a peer on the
 * same host that has just posted to it {@link Remote#ring rings} the doorbell, which clears the
 * word and wakes the sleeper. The peer's post and its read of the word, like the sleeper's store
 * and its last poll, are ordered by full fences, so either the last poll sees the message or the
 * sender sees the word set: no wake-up is lost.
 *
 * <p>The word is a small file in {@code /dev/shm} named after this process, mapped by the peers
 * that learn its path on the control channel; it is deleted on {@link #close}, and files left by
 * processes that no longer exist are removed when a new one is made: the owner holds an
 * {@link OwnerLock} on its file, so a doorbell whose lock is free is a dead process's, in
 * whatever PID namespace it ran (files without the lock's mark are judged by their process id).
 */
final class Doorbell implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport.fabric");
    private static final Path DIRECTORY = Path.of("/dev/shm");
    private static final String PREFIX = "ferry-doorbell-";
    /** Marks doorbells whose owner holds an {@link OwnerLock} (a live owner, in any PID namespace). */
    static final String MARK = "user.ferry.doorbell";
    private static final long SYS_FUTEX = 202; // x86-64
    private static final long FUTEX_WAIT = 0;
    private static final long FUTEX_WAKE = 1;
    private static final VarHandle WORD = JAVA_INT.varHandle();
    private static final MethodHandle SYSCALL = syscall();

    private final Path path;
    private final Arena arena;
    private final MemorySegment word;
    private final MemorySegment timeout;
    private final OwnerLock lock;

    private Doorbell(Path path, Arena arena, MemorySegment word) {
        this.path = path;
        this.arena = arena;
        this.word = word;
        this.timeout = arena.allocate(16, 8);
        this.lock = OwnerLock.hold(path, MARK);
    }

    private static MethodHandle syscall() {
        if (!System.getProperty("os.name", "").startsWith("Linux") || !"amd64".equals(System.getProperty("os.arch"))) {
            return null;
        }
        Linker linker = Linker.nativeLinker();
        return linker.defaultLookup().find("syscall")
                .map(symbol -> linker.downcallHandle(symbol, FunctionDescriptor.of(JAVA_LONG, JAVA_LONG, JAVA_LONG,
                        JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG), Linker.Option.firstVariadicArg(1)))
                .orElse(null);
    }

    /** A doorbell of this process, or null where the system has none (not Linux x86-64, no /dev/shm). */
    static Doorbell create() {
        if (SYSCALL == null || !Files.isDirectory(DIRECTORY)) {
            return null;
        }
        removeLeftovers();
        long pid = ProcessHandle.current().pid();
        Path path = DIRECTORY.resolve(PREFIX + pid + "-" + Long.toHexString(FabricTransport.randomLong()));
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            return new Doorbell(path, arena, channel.map(FileChannel.MapMode.READ_WRITE, 0, 64, arena));
        } catch (IOException | RuntimeException e) {
            arena.close();
            deleteQuietly(path);
            LOG.log(System.Logger.Level.DEBUG, "no doorbell: " + e);
            return null;
        }
    }

    /** Removes doorbell files of processes that no longer run (killed without their close). */
    private static void removeLeftovers() {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(DIRECTORY, PREFIX + "*")) {
            for (Path file : files) {
                if (OwnerLock.deleteIfUnheld(file, MARK) || OwnerLock.isMarked(file, MARK)) {
                    continue; // its owner died, or lives
                }
                // Unmarked: an owner that holds no lock; judged by its process id.
                String name = file.getFileName().toString();
                int dash = name.indexOf('-', PREFIX.length());
                try {
                    long pid = Long.parseLong(name.substring(PREFIX.length(), dash < 0 ? name.length() : dash));
                    if (ProcessHandle.of(pid).isEmpty()) {
                        deleteQuietly(file);
                    }
                } catch (NumberFormatException e) {
                    // not one of ours
                }
            }
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot list doorbells: " + e);
        }
    }

    /** The path peers on this host map to ring this doorbell. */
    String path() {
        return path.toString();
    }

    /** Marks this side as about to sleep; the caller polls once more before {@link #await}. */
    void arm() {
        WORD.setVolatile(word, 0L, 1);
        VarHandle.fullFence();
    }

    /** Marks this side awake again. */
    void disarm() {
        WORD.setVolatile(word, 0L, 0);
    }

    /** Sleeps until rung, or {@code nanos} pass, or a signal; returns at once if rung since {@link #arm}. */
    void await(long nanos) {
        timeout.set(JAVA_LONG, 0, nanos / 1_000_000_000L);
        timeout.set(JAVA_LONG, 8, nanos % 1_000_000_000L);
        try {
            long rc = (long) SYSCALL.invokeExact(SYS_FUTEX, word.address(), FUTEX_WAIT, 1L, timeout.address(), 0L, 0L);
            assert rc == 0 || rc == -1; // woken, or EAGAIN (already rung), ETIMEDOUT, EINTR
        } catch (Throwable t) {
            throw new IllegalStateException("futex wait failed", t);
        }
    }

    /** Wakes this side's own sleeper (work handed over by an application thread). */
    void ring() {
        ring(word);
    }

    private static void ring(MemorySegment word) {
        VarHandle.fullFence();
        if ((int) WORD.getVolatile(word, 0L) != 0 && WORD.compareAndSet(word, 0L, 1, 0)) {
            try {
                long rc = (long) SYSCALL.invokeExact(SYS_FUTEX, word.address(), FUTEX_WAKE, 1L, 0L, 0L, 0L);
                assert rc >= 0;
            } catch (Throwable t) {
                throw new IllegalStateException("futex wake failed", t);
            }
        }
    }

    /** Maps a peer's doorbell by the path it sent, or returns null if it is not on this host. */
    static Remote open(String path) {
        if (SYSCALL == null || path.isEmpty()) {
            return null;
        }
        // Only a doorbell file: a peer names the path, so nothing else may be mapped or grown.
        Path file;
        try {
            file = Path.of(path).normalize();
        } catch (java.nio.file.InvalidPathException e) {
            return null; // a NUL byte, say: no file of ours
        }
        if (!DIRECTORY.equals(file.getParent()) || !file.getFileName().toString().startsWith(PREFIX)) {
            return null;
        }
        Arena arena = Arena.ofShared();
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            if (channel.size() != 64) {
                arena.close();
                return null;
            }
            return new Remote(arena, channel.map(FileChannel.MapMode.READ_WRITE, 0, 64, arena));
        } catch (IOException | RuntimeException e) {
            arena.close();
            return null;
        }
    }

    @Override
    public void close() {
        arena.close();
        deleteQuietly(path);
        if (lock != null) {
            lock.close();
        }
    }

    private static void deleteQuietly(Path path) {
        try {
            Files.deleteIfExists(path);
        } catch (IOException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot delete " + path + ": " + e);
        }
    }

    /** A peer's doorbell, mapped here. */
    static final class Remote implements AutoCloseable {

        private final Arena arena;
        private final MemorySegment word;

        private Remote(Arena arena, MemorySegment word) {
            this.arena = arena;
            this.word = word;
        }

        /** Wakes the peer's progress thread if it sleeps; call after posting to it. */
        void ring() {
            Doorbell.ring(word);
        }

        @Override
        public void close() {
            arena.close();
        }
    }
}
