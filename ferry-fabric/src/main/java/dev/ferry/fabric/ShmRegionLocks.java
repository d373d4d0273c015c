package dev.ferry.fabric;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

/**
 * Releases the region lock that a dead shm peer held, on which every process sending to it
 * would otherwise spin for ever.
 *
 * <p>libfabric 1.17's shm provider (the version Debian bookworm ships) guards each endpoint's
 * region with a {@code pthread_spinlock_t} in the region itself: the owner takes it around the
 * whole of its command processing, and a sender takes the <em>receiver's</em> lock in {@code
 * fi_send}. A process killed with SIGKILL while it processes its commands leaves its lock held,
 * and the next {@code fi_send} to it in any other process spins in {@code pthread_spin_lock} with
 * no end: that process's progress thread, and with it every peer it serves, stops. (Later
 * libfabric versions post to a lock-free queue instead.)
 *
 * <p>When a peer's control channel ends, the transport waits until the region's owner is proven
 * gone ({@link #awaitOwnerGone}: its {@link ShmRegions#MARK marked} file unheld, or removed) and
 * then asks {@link #releaseDeadOwners}: if the lock is still held, the lock is released through {@code pthread_spin_unlock} on a
 * mapping of the region that this class makes for the access (through a handle {@link #open
 * opened} at the handshake, so a removed file is still reached); libfabric's own mapping is never
 * touched, so no other thread can unmap what is read. Nobody depends on mutual exclusion in a dead process's
 * region any more; senders to it are torn down next.
 *
 * <p>The lock's place is that of libfabric 1.17's {@code struct smr_region} ({@code version,
 * resv, flags, pid, cma_cap_peer, cma_cap_self, max_sar_buf_per_peer, base_addr, lock}). It is
 * used only after {@link #understood} checked it on this process's own region (the pid and the
 * region's own address where 1.17 keeps them); on any other layout nothing is touched.
 *
 * <p>Any thread but the one that may be stuck (the transport calls it from the control plane).
 */
public final class ShmRegionLocks {

    private static final System.Logger LOG = System.getLogger("dev.ferry.fabric");
    private static final long PID_OFFSET = 4;
    private static final long BASE_ADDRESS_OFFSET = 16;
    private static final long LOCK_OFFSET = 24;
    /** The bytes of a region's header that are mapped to read them: one page. */
    private static final long HEADER_BYTES = 4096;
    private static final Path MAPS = Path.of("/proc/self/maps");

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle SPIN_INIT = libc("pthread_spin_init", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SPIN_LOCK = libc("pthread_spin_lock", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    private static final MethodHandle SPIN_UNLOCK = libc("pthread_spin_unlock", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    /** The value of an unlocked {@code pthread_spinlock_t}, as this libc writes it. */
    private static final int UNLOCKED = unlockedValue();

    /** Null until this process's own region could be checked; then whether the layout is 1.17's. */
    private static volatile Boolean understood;

    private ShmRegionLocks() {
    }

    private static MethodHandle libc(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor);
    }

    private static int unlockedValue() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment lock = arena.allocate(JAVA_INT);
            int rc = (int) SPIN_INIT.invokeExact(lock, 0);
            if (rc != 0) {
                throw new IllegalStateException("pthread_spin_init: " + rc);
            }
            return lock.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /**
     * Whether the region lock's place is known on this libfabric: checked once on this process's
     * own shm region (false if it has none yet, and checked again next time).
     */
    public static boolean understood() {
        Boolean known = understood;
        if (known != null) {
            return known;
        }
        long pid = ProcessHandle.current().pid();
        for (Mapping own : mappings(pid + ":")) {
            Boolean layout = withHeader(ShmRegions.DIRECTORY.resolve(own.name), null, header ->
                    header.get(JAVA_INT, PID_OFFSET) == pid && header.get(JAVA_LONG, BASE_ADDRESS_OFFSET) == own.start);
            if (layout == null) {
                continue; // removed meanwhile (closing)
            }
            if (!layout) {
                LOG.log(System.Logger.Level.WARNING, "this libfabric's shm region layout is not 1.17's: a peer killed while it held"
                        + " its region lock can stop this process's sends to it (no release attempted)");
            }
            understood = layout;
            return layout;
        }
        return false;
    }

    /**
     * An open handle on the region of the shm endpoint named {@code address}, taken while its
     * owner is alive (at the handshake), so that the region can still be reached after its file
     * is removed; null if the name is not a region's or the file cannot be opened.
     */
    public static FileChannel open(byte[] address) {
        Path file = ShmRegions.regionOf(address);
        if (file == null) {
            return null;
        }
        try {
            return FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            LOG.log(System.Logger.Level.DEBUG, "cannot open the shm region " + file + ": " + e.getMessage());
            return null;
        }
    }

    /**
     * Releases the region lock of the shm endpoint named {@code address}, reached through
     * {@code region} (from {@link #open}), whose owner {@link #awaitOwnerGone} found gone, if the
     * lock is still held; true if it released it. The region is mapped afresh for the access:
     * nothing here reads memory that someone else may unmap.
     */
    public static boolean releaseDeadOwners(byte[] address, FileChannel region) {
        if (release(region)) {
            LOG.log(System.Logger.Level.WARNING, "released the shm region lock that the dead peer "
                    + ShmRegions.regionOf(address).getFileName()
                    + " held (libfabric 1.17 shm leaves it held when its owner is killed mid-progress)");
            return true;
        }
        return false;
    }

    /**
     * Whether the owner of the shm endpoint named {@code address} is gone (its {@link
     * ShmRegions#MARK marked} file unheld, or removed), waiting up to {@code waitMillis} for it (a
     * dying process closes its files after its sockets): false if it still holds its file then
     * (alive, or not a Ferry region).
     */
    public static boolean awaitOwnerGone(byte[] address, long waitMillis) throws InterruptedException {
        Path file = ShmRegions.regionOf(address);
        if (file == null) {
            return false;
        }
        long deadline = System.nanoTime() + waitMillis * 1_000_000L;
        while (!OwnerLock.isGone(file, ShmRegions.MARK)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    /**
     * Whether the region lock of {@code region} (from {@link #open}) is held now; null if the
     * layout is not {@linkplain #understood() understood} or the region cannot be mapped. A
     * sample, mapped afresh: the lock may change the moment after.
     */
    public static Boolean held(FileChannel region) {
        if (region == null || !understood()) {
            return null;
        }
        return withHeader(null, region, header -> header.get(JAVA_INT, LOCK_OFFSET) != UNLOCKED);
    }

    /**
     * Releases the region lock of {@code region} (from {@link #open}) if it is held; true if it
     * released it. Only for a lock whose holder is proven dead: a spin lock has no owner, so this
     * would break the exclusion of a live holder.
     */
    public static boolean release(FileChannel region) {
        if (region == null || !understood()) {
            return false;
        }
        return Boolean.TRUE.equals(withHeader(null, region, header -> {
            MemorySegment lock = header.asSlice(LOCK_OFFSET, 4);
            if (lock.get(JAVA_INT, 0) == UNLOCKED) {
                return false;
            }
            try {
                int rc = (int) SPIN_UNLOCK.invokeExact(lock);
                assert rc == 0 : "pthread_spin_unlock: " + rc;
            } catch (Throwable t) {
                throw LibFabric.rethrow(t);
            }
            return true;
        }));
    }

    /**
     * Fault injection for tests: takes the region lock of {@code region} (another endpoint's,
     * from {@link #open}) and keeps it, as a sender killed inside {@code fi_send} to that endpoint
     * would. False if the layout is not understood or the region cannot be mapped.
     */
    public static boolean holdRegionLock(FileChannel region) {
        if (region == null || !understood()) {
            return false;
        }
        return Boolean.TRUE.equals(withHeader(null, region, ShmRegionLocks::spinLock));
    }

    /**
     * Fault injection for tests: takes this process's own region lock and keeps it, as a process
     * killed inside shm's progress would. False if this process has no shm region or its layout
     * is not understood.
     */
    public static boolean holdOwnRegionLock() {
        if (!understood()) {
            return false;
        }
        for (Mapping own : mappings(ProcessHandle.current().pid() + ":")) {
            Boolean locked = withHeader(ShmRegions.DIRECTORY.resolve(own.name), null, ShmRegionLocks::spinLock);
            if (locked != null) {
                return locked;
            }
        }
        return false;
    }

    /** Takes the lock in a mapped region header and keeps it (the fault hooks); true if taken. */
    private static boolean spinLock(MemorySegment header) {
        try {
            return (int) SPIN_LOCK.invokeExact(header.asSlice(LOCK_OFFSET, 4)) == 0;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /**
     * Maps the first bytes of a region (the file, or the open {@code channel}) in this process's
     * own mapping, applies {@code check} and unmaps; null if the region cannot be mapped.
     */
    private static Boolean withHeader(Path file, FileChannel channel, java.util.function.Predicate<MemorySegment> check) {
        try (Arena arena = Arena.ofConfined();
             FileChannel opened = channel == null ? FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE) : null) {
            FileChannel use = channel != null ? channel : opened;
            if (use.size() < HEADER_BYTES) {
                return null;
            }
            return check.test(use.map(FileChannel.MapMode.READ_WRITE, 0, HEADER_BYTES, arena));
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return null;
        }
    }

    private record Mapping(long start, String name) {
    }

    /** This process's mappings, at file offset 0, of {@code /dev/shm} files whose name starts with {@code prefix}. */
    private static List<Mapping> mappings(String prefix) {
        String directory = ShmRegions.DIRECTORY + "/";
        List<String> lines;
        try {
            lines = Files.readAllLines(MAPS);
        } catch (IOException e) {
            return List.of();
        }
        List<Mapping> found = new java.util.ArrayList<>();
        for (String line : lines) {
            // start-end perms offset dev inode path[ (deleted)]
            String[] fields = line.split("\\s+", 6);
            if (fields.length < 6 || !fields[5].startsWith(directory) || !fields[2].matches("0+")) {
                continue;
            }
            String name = fields[5].substring(directory.length());
            if (name.endsWith(" (deleted)")) {
                name = name.substring(0, name.length() - " (deleted)".length());
            }
            if (prefix.endsWith(":") ? name.startsWith(prefix) : name.equals(prefix)) {
                found.add(new Mapping(Long.parseUnsignedLong(fields[0].substring(0, fields[0].indexOf('-')), 16), name));
            }
        }
        return found;
    }
}
