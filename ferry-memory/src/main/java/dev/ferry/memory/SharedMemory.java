package dev.ferry.memory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.util.Locale;

/**
 * Memory another process on this host can map: an anonymous file ({@code memfd_create}), sealed
 * against shrinking and growing, mapped shared. The owner writes it; a peer opens it through
 * {@code /proc/<pid>/fd/<fd>} (which the kernel allows where it would allow that peer to read the
 * owner's memory anyway: the same check as {@code process_vm_readv}, which libfabric's shm provider
 * copies with) and maps it read-only, so that a message the owner built there is read in place, with
 * no copy across the processes. The seals are what make a peer's mapping safe: the owner cannot
 * truncate the file under it (a read past the end would be a SIGBUS, not an exception), and a peer
 * checks them before it maps. A peer's mapping keeps the pages alive after the owner unmaps them or
 * dies; they go with the last mapping. Linux only; {@link #available} says whether the calls exist.
 */
public final class SharedMemory {

    private static final int MFD_CLOEXEC = 0x1;
    private static final int MFD_ALLOW_SEALING = 0x2;
    private static final int F_ADD_SEALS = 1033;
    private static final int F_GET_SEALS = 1034;
    private static final int F_SEAL_SEAL = 0x1;
    private static final int F_SEAL_SHRINK = 0x2;
    private static final int F_SEAL_GROW = 0x4;
    private static final int PROT_NONE = 0x0;
    private static final int PROT_READ = 0x1;
    private static final int PROT_READ_WRITE = 0x3;
    private static final int MAP_SHARED = 0x01;
    private static final int MAP_PRIVATE_ANONYMOUS = 0x02 | 0x20;
    private static final int MAP_FIXED = 0x10;
    private static final int O_RDONLY_CLOEXEC = 0x80000;
    private static final int O_NONBLOCK = 0x800;
    private static final int O_NOCTTY = 0x100;
    private static final int SEEK_END = 2;
    private static final String MEMFD_LINK = "/memfd:";
    private static final StructLayout CAPTURED = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURED.varHandle(MemoryLayout.PathElement.groupElement("errno"));

    private static final MethodHandle MEMFD_CREATE;
    private static final MethodHandle FTRUNCATE;
    private static final MethodHandle FCNTL;
    private static final MethodHandle MMAP;
    private static final MethodHandle MUNMAP;
    private static final MethodHandle OPEN;
    private static final MethodHandle CLOSE;
    private static final MethodHandle LSEEK;
    private static final MethodHandle READLINK;

    static {
        MethodHandle[] h = null;
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option errno = Linker.Option.captureCallState("errno");
                ValueLayout.OfInt i = ValueLayout.JAVA_INT;
                ValueLayout.OfLong l = ValueLayout.JAVA_LONG;
                h = new MethodHandle[] {
                    linker.downcallHandle(libc.find("memfd_create").orElseThrow(), FunctionDescriptor.of(i, l, i), errno),
                    linker.downcallHandle(libc.find("ftruncate").orElseThrow(), FunctionDescriptor.of(i, i, l), errno),
                    linker.downcallHandle(libc.find("fcntl").orElseThrow(), FunctionDescriptor.of(i, i, i, i), errno,
                            Linker.Option.firstVariadicArg(2)),
                    linker.downcallHandle(libc.find("mmap").orElseThrow(), FunctionDescriptor.of(l, l, l, i, i, i, l), errno),
                    linker.downcallHandle(libc.find("munmap").orElseThrow(), FunctionDescriptor.of(i, l, l)),
                    linker.downcallHandle(libc.find("open").orElseThrow(), FunctionDescriptor.of(i, l, i), errno,
                            Linker.Option.firstVariadicArg(2)),
                    linker.downcallHandle(libc.find("close").orElseThrow(), FunctionDescriptor.of(i, i)),
                    linker.downcallHandle(libc.find("lseek").orElseThrow(), FunctionDescriptor.of(l, i, l, i), errno),
                    linker.downcallHandle(libc.find("readlink").orElseThrow(), FunctionDescriptor.of(l, l, l, l), errno),
                };
            } catch (RuntimeException | Error unavailable) {
                h = null;
            }
        }
        MEMFD_CREATE = h == null ? null : h[0];
        FTRUNCATE = h == null ? null : h[1];
        FCNTL = h == null ? null : h[2];
        MMAP = h == null ? null : h[3];
        MUNMAP = h == null ? null : h[4];
        OPEN = h == null ? null : h[5];
        CLOSE = h == null ? null : h[6];
        LSEEK = h == null ? null : h[7];
        READLINK = h == null ? null : h[8];
    }

    /** A file this process created and maps read-write: its memory and its descriptor. */
    public record Region(MemorySegment segment, int fd, String name) {
    }

    private SharedMemory() {
    }

    /** Whether this system has the calls ({@code memfd_create} and friends). */
    public static boolean available() {
        return MEMFD_CREATE != null;
    }

    /**
     * A sealed file named {@code name} of {@code bytes} zeroed bytes, mapped read-write at an
     * {@code alignment} boundary (a power of two, at least a page); unmapped and its descriptor
     * closed when {@code arena} closes.
     *
     * @throws IOException with the failing call and its errno
     */
    public static Region create(Arena arena, String name, long bytes, long alignment) throws IOException {
        if (!available()) {
            throw new IOException("no memfd_create on this system");
        }
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CAPTURED);
            int fd = (int) MEMFD_CREATE.invokeExact(state, call.allocateFrom(name).address(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
            if (fd < 0) {
                throw failure("memfd_create " + name, state);
            }
            try {
                if ((int) FTRUNCATE.invokeExact(state, fd, bytes) != 0) {
                    throw failure("ftruncate " + name + " to " + bytes, state);
                }
                if ((int) FCNTL.invokeExact(state, fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
                    throw failure("sealing " + name, state);
                }
                MemorySegment segment = map(arena, state, fd, bytes, alignment, PROT_READ_WRITE, name, fd);
                return new Region(segment, fd, name);
            } catch (IOException | RuntimeException | Error e) {
                int ignored = (int) CLOSE.invokeExact(fd);
                throw e;
            }
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IOException("shared memory " + name + ": " + e, e);
        }
    }

    /**
     * Maps read-only the first {@code bytes} (0: all) of the file that process {@code pid} holds as
     * descriptor {@code fd}, after checking that it is the file named {@code name}, sealed against
     * shrinking and at least {@code bytes} long. Unmapped when {@code arena} closes; the descriptor
     * opened here is closed before this returns.
     *
     * @throws IOException why it cannot be mapped: no such process or descriptor, not allowed,
     *     another file, not sealed, too short
     */
    public static MemorySegment mapPeer(Arena arena, long pid, int fd, String name, long bytes) throws IOException {
        return mapPeer(arena, pid, fd, name, bytes, Long.MAX_VALUE);
    }

    /**
     * {@link #mapPeer(Arena, long, int, String, long)}, refusing a file of more than
     * {@code maxBytes}: a peer cannot make this process reserve address space without bound.
     *
     * @throws IOException as there, or if the file is larger than {@code maxBytes}
     */
    public static MemorySegment mapPeer(Arena arena, long pid, int fd, String name, long bytes, long maxBytes)
            throws IOException {
        if (!available()) {
            throw new IOException("no memfd_create on this system");
        }
        if (pid <= 0 || fd < 0 || bytes < 0) {
            throw new IOException("bad shared memory reference: pid " + pid + ", fd " + fd + ", " + bytes + " bytes");
        }
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CAPTURED);
            int own = openPeer(call, state, pid, fd, name);
            try {
                int seals = (int) FCNTL.invokeExact(state, own, F_GET_SEALS, 0);
                if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
                    throw new IOException(name + " of process " + pid + " is not sealed against shrinking");
                }
                long size = (long) LSEEK.invokeExact(state, own, 0L, SEEK_END);
                if (size < bytes || size <= 0) {
                    throw new IOException(name + " of process " + pid + " holds " + size + " bytes, not " + bytes);
                }
                if (size > maxBytes && bytes == 0) {
                    throw new IOException(name + " of process " + pid + " holds " + size + " bytes, more than " + maxBytes);
                }
                return map(arena, state, own, bytes == 0 ? size : bytes, HugePageMemory.HUGE_PAGE, PROT_READ, name, -1);
            } finally {
                int ignored = (int) CLOSE.invokeExact(own);
            }
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IOException("mapping " + name + " of process " + pid + ": " + e, e);
        }
    }

    /**
     * Whether process {@code pid}'s descriptor {@code fd} is the file named {@code name} and this
     * process may open it: what a peer checks once before it relies on {@link #mapPeer}.
     *
     * @throws IOException why not
     */
    public static void probe(long pid, int fd, String name) throws IOException {
        if (!available()) {
            throw new IOException("no memfd_create on this system");
        }
        try (Arena call = Arena.ofConfined()) {
            MemorySegment state = call.allocate(CAPTURED);
            int own = openPeer(call, state, pid, fd, name);
            int ignored = (int) CLOSE.invokeExact(own);
        } catch (IOException | RuntimeException | Error e) {
            throw e;
        } catch (Throwable e) {
            throw new IOException("probing " + name + " of process " + pid + ": " + e, e);
        }
    }

    /**
     * Opens {@code /proc/pid/fd/fd} and checks, on the descriptor it got, that it is {@code name}.
     * The peer chose the numbers: the link is read first, so that nothing but a memory file of
     * that name is opened at all (a FIFO would block the open, a device could act on it), and the
     * open does not block nor take a terminal.
     */
    private static int openPeer(Arena call, MemorySegment state, long pid, int fd, String name) throws Throwable {
        String path = "/proc/" + pid + "/fd/" + fd;
        String expected = MEMFD_LINK + name;
        String named = readLink(call, state, path);
        if (named == null) {
            throw failure("readlink " + path, state);
        }
        if (!named.equals(expected) && !named.equals(expected + " (deleted)")) {
            throw new IOException(path + " is " + named + ", not " + expected);
        }
        int own = (int) OPEN.invokeExact(state, call.allocateFrom(path).address(), O_RDONLY_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (own < 0) {
            throw failure("open " + path, state);
        }
        // The name is read off the descriptor this process holds, not the peer's: the peer may
        // have closed and reused its number meanwhile, but what was opened cannot change.
        String target = readLink(call, state, "/proc/self/fd/" + own);
        if (target == null) {
            target = "?";
        }
        if (!target.equals(expected) && !target.equals(expected + " (deleted)")) {
            int ignored = (int) CLOSE.invokeExact(own);
            throw new IOException(path + " is " + target + ", not " + expected);
        }
        return own;
    }

    /** What the symbolic link {@code path} names, or null (errno in {@code state}). */
    private static String readLink(Arena call, MemorySegment state, String path) throws Throwable {
        MemorySegment target = call.allocate(512);
        long n = (long) READLINK.invokeExact(state, call.allocateFrom(path).address(), target.address(), target.byteSize());
        return n < 0 ? null : new String(target.asSlice(0, n).toArray(ValueLayout.JAVA_BYTE), StandardCharsets.UTF_8);
    }

    /** Maps {@code bytes} of {@code fd} at an {@code alignment} boundary; closes {@code closeFd} (if >= 0) with the arena. */
    private static MemorySegment map(Arena arena, MemorySegment state, int fd, long bytes, long alignment, int protection,
            String name, int closeFd) throws Throwable {
        long length = bytes + alignment;
        long base = (long) MMAP.invokeExact(state, 0L, length, PROT_NONE, MAP_PRIVATE_ANONYMOUS, -1, 0L);
        if (base == -1L) {
            throw failure("reserving " + length + " bytes for " + name, state);
        }
        long aligned = (base + alignment - 1) & -alignment;
        long at = (long) MMAP.invokeExact(state, aligned, bytes, protection, MAP_SHARED | MAP_FIXED, fd, 0L);
        if (at != aligned) {
            int ignored = (int) MUNMAP.invokeExact(base, length);
            throw failure("mapping " + name, state);
        }
        if (bytes % HugePageMemory.HUGE_PAGE == 0) {
            HugePageMemory.advise(aligned, bytes); // huge pages where the system's shmem THP setting allows them
        }
        return MemorySegment.ofAddress(aligned).reinterpret(bytes, arena, segment -> release(base, length, closeFd));
    }

    private static void release(long base, long length, int fd) {
        try {
            int ignored = (int) MUNMAP.invokeExact(base, length);
            if (fd >= 0) {
                ignored = (int) CLOSE.invokeExact(fd);
            }
        } catch (Throwable e) {
            // nothing to do at close
        }
    }

    private static IOException failure(String what, MemorySegment state) {
        return new IOException(what + " failed: errno " + (int) ERRNO.get(state, 0L));
    }
}
