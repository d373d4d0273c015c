package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The native side: the few symbols libfabric exports, and one address-less downcall handle per
 * C signature for everything it reaches through ops tables.
 *
 * <p>Pointers are passed as {@code long}. On the 64-bit ABIs libfabric runs on (SysV x86-64,
 * AAPCS64) a pointer and a 64-bit integer travel in the same registers, and passing addresses as
 * primitives keeps the data path free of {@link MemorySegment} allocations. Handles are
 * static-final so the JIT can fold them; the function pointer is their first argument.
 */
final class LibFabric {

    static final Linker LINKER = Linker.nativeLinker();

    /** All of memory, for reading native structs by address. */
    static final MemorySegment MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);

    private static final SymbolLookup LIB = load();

    private static SymbolLookup load() {
        defaultEnvironment();
        SignalGuard.init();
        try {
            SymbolLookup lib = open();
            SpinLockYield.install();
            return lib;
        } finally {
            SignalGuard.restore();
        }
    }

    private static SymbolLookup open() {
        String override = System.getProperty("ferry.libfabric");
        String[] names = override != null ? new String[] {override}
                : new String[] {"libfabric.so.1", "libfabric.so"};
        UnsatisfiedLinkError last = null;
        for (String name : names) {
            try {
                return SymbolLookup.libraryLookup(name, Arena.global());
            } catch (IllegalArgumentException | UnsatisfiedLinkError e) {
                last = new UnsatisfiedLinkError("cannot load " + name + ": " + e.getMessage());
            }
        }
        throw new FabricException("libfabric is not installed (looked for " + Arrays.toString(names)
                + "); run bin/setup or apt-get install libfabric1", last);
    }

    /**
     * Peers that rxm ({@code verbs;ofi_rxm}, {@code tcp;ofi_rxm}) sizes its resources for,
     * {@code FI_UNIVERSE_SIZE}: rxm opens one completion queue for all its connections with
     * (tx + rx queue size) x universe entries, 196,608 at libfabric's default of 256, more than
     * many verbs devices allow (Soft-RoCE: 32,767), and {@code fi_enable} then fails with EINVAL.
     * Ferry's receive credits bound what is outstanding per link, so the queue need not scale
     * with every possible peer. {@code -Dferry.fabric.universeSize} or the environment variable
     * override it.
     */
    static final String DEFAULT_UNIVERSE_SIZE = "32";

    /**
     * Settings libfabric reads from the environment once, at its first call; a value the user
     * set in the environment wins. Ferry keeps its own registration cache, so libfabric's (whose
     * memory monitor patches the process's memory calls under the JVM) is off; rxm's universe
     * is {@link #DEFAULT_UNIVERSE_SIZE} unless {@code -Dferry.fabric.universeSize} says otherwise.
     * ({@code FI_OFI_RXM_USE_SRX=1}, a shared receive context for rxm on verbs, also keeps rxm's
     * close from reposting buffers to closed endpoints, but with it a 4 MiB {@code fi_writedata}
     * over {@code verbs;ofi_rxm} never completed at the target; {@link FabricSession#quiesce()}
     * is the work-around instead.)
     *
     * <p>{@code HFI_NO_BACKTRACE} and {@code IPATH_NO_BACKTRACE}: libfabric links libpsm2 and
     * libinfinipath, whose constructors, run when libfabric is loaded, take SIGSEGV, SIGBUS,
     * SIGILL, SIGABRT, SIGINT and SIGTERM with a handler that writes a {@code .btr} back-trace file
     * and exits. {@link SignalGuard} puts the JVM's back right after the load, but a routine JVM
     * SIGSEGV (an implicit null check) on another thread in between ended the process; with
     * these set the constructors install nothing.
     */
    private static void defaultEnvironment() {
        setDefault("HFI_NO_BACKTRACE", "1");
        setDefault("IPATH_NO_BACKTRACE", "1");
        setDefault("FI_MR_CACHE_MONITOR", "disabled");
        setDefault("FI_UNIVERSE_SIZE", System.getProperty("ferry.fabric.universeSize", DEFAULT_UNIVERSE_SIZE));
    }

    private static void setDefault(String name, String value) {
        MethodHandle setenv = libc("setenv", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG, JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            int rc = (int) setenv.invokeExact(arena.allocateFrom(name).address(), arena.allocateFrom(value).address(), 0);
            if (rc != 0) {
                throw new FabricException("setenv " + name + " failed");
            }
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static MethodHandle exported(String name, FunctionDescriptor descriptor) {
        MemorySegment symbol = LIB.find(name)
                .orElseThrow(() -> new FabricException("libfabric lacks symbol " + name));
        return LINKER.downcallHandle(symbol, descriptor);
    }

    private static MethodHandle libc(String name, FunctionDescriptor descriptor) {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(), descriptor);
    }

    /** An address-less handle: {@code (MemorySegment fn, args...)}. */
    private static MethodHandle signature(MemoryLayout result, MemoryLayout... args) {
        return LINKER.downcallHandle(FunctionDescriptor.of(result, args));
    }

    private static final MemoryLayout L = JAVA_LONG;
    private static final MemoryLayout I = JAVA_INT;

    // Exported symbols.
    static final MethodHandle FI_GETINFO = exported("fi_getinfo", FunctionDescriptor.of(I, I, L, L, L, L, L));
    static final MethodHandle FI_FREEINFO = exported("fi_freeinfo", FunctionDescriptor.ofVoid(L));
    static final MethodHandle FI_DUPINFO = exported("fi_dupinfo", FunctionDescriptor.of(L, L));
    static final MethodHandle FI_FABRIC = exported("fi_fabric", FunctionDescriptor.of(I, L, L, L));
    static final MethodHandle FI_STRERROR = exported("fi_strerror", FunctionDescriptor.of(L, I));
    static final MethodHandle FI_VERSION = exported("fi_version", FunctionDescriptor.of(I));
    static final MethodHandle FI_TOSTR = exported("fi_tostr", FunctionDescriptor.of(L, L, I));
    static final MethodHandle STRDUP = libc("strdup", FunctionDescriptor.of(L, L));
    static final MethodHandle MALLOC = libc("malloc", FunctionDescriptor.of(L, L));
    static final MethodHandle FREE = libc("free", FunctionDescriptor.ofVoid(L));

    // Signatures reached through ops tables; named by result and argument kinds.
    static final MethodHandle I_J = signature(I, L);
    static final MethodHandle I_JJ = signature(I, L, L);
    static final MethodHandle I_JJJ = signature(I, L, L, L);
    static final MethodHandle I_JIJ = signature(I, L, I, L);
    static final MethodHandle I_JJJJ = signature(I, L, L, L, L);
    static final MethodHandle I_JJJJJJ = signature(I, L, L, L, L, L, L);
    static final MethodHandle I_JJJJJJJJJ = signature(I, L, L, L, L, L, L, L, L, L);
    static final MethodHandle L_J = signature(L, L);
    static final MethodHandle L_JJJ = signature(L, L, L, L);
    static final MethodHandle L_JJJJ = signature(L, L, L, L, L);
    static final MethodHandle L_JJJJI = signature(L, L, L, L, L, I);
    static final MethodHandle L_JJJJJ = signature(L, L, L, L, L, L);
    static final MethodHandle L_JJJJIJ = signature(L, L, L, L, L, I, L);
    static final MethodHandle L_JJJJJI = signature(L, L, L, L, L, L, I);
    static final MethodHandle L_JJJJJJ = signature(L, L, L, L, L, L, L);
    static final MethodHandle L_JJJJJJJ = signature(L, L, L, L, L, L, L, L);
    static final MethodHandle L_JJJJJJJJ = signature(L, L, L, L, L, L, L, L, L);
    static final MethodHandle L_JJJJJJJJJ = signature(L, L, L, L, L, L, L, L, L, L);
    static final MethodHandle J_JIJJJ = signature(L, L, I, L, L, L);

    static final int FI_ENABLE = 6;
    static final int FI_TYPE_INFO = 0;

    private LibFabric() {
    }

    /** {@code FI_VERSION(major, minor)}. */
    static int version(int major, int minor) {
        return (major << 16) | minor;
    }

    /** The API version Ferry asks for: the library's own, capped at the one Ferry was written against. */
    static int apiVersion() {
        return Math.min(libraryVersion(), version(1, 17));
    }

    static int libraryVersion() {
        try {
            return (int) FI_VERSION.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Reads a pointer-sized field. */
    static long word(long address, long offset) {
        return MEMORY.get(JAVA_LONG, address + offset);
    }

    /** Reads an int field. */
    static int int32(long address, long offset) {
        return MEMORY.get(JAVA_INT, address + offset);
    }

    /** The function pointer at {@code table + offset}, as the first argument of a signature handle. */
    static MemorySegment function(long table, long offset) {
        long fn = word(table, offset);
        if (fn == 0) {
            throw new FabricException("provider does not implement the operation at ops offset " + offset);
        }
        return MemorySegment.ofAddress(fn);
    }

    /** A NUL-terminated C string at {@code address}, or null. */
    static String string(long address) {
        if (address == 0) {
            return null;
        }
        return MemorySegment.ofAddress(address).reinterpret(Integer.MAX_VALUE).getString(0, StandardCharsets.UTF_8);
    }

    /** A malloc'd copy of {@code value}, for fields that libfabric frees itself. */
    static long strdup(String value) {
        try (Arena arena = Arena.ofConfined()) {
            long copy = (long) STRDUP.invokeExact(arena.allocateFrom(value).address());
            if (copy == 0) {
                throw new OutOfMemoryError("strdup");
            }
            return copy;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** A malloc'd copy of {@code bytes}, for fields that libfabric frees itself. */
    static long malloc(byte[] bytes) {
        try {
            long copy = (long) MALLOC.invokeExact((long) Math.max(1, bytes.length));
            if (copy == 0) {
                throw new OutOfMemoryError("malloc");
            }
            MemorySegment.copy(bytes, 0, MEMORY, java.lang.foreign.ValueLayout.JAVA_BYTE, copy, bytes.length);
            return copy;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Frees what malloc, strdup or libfabric allocated. */
    static void free(long address) {
        try {
            FREE.invokeExact(address);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static String strerror(int errno) {
        try {
            return string((long) FI_STRERROR.invokeExact(errno));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Throws {@link FabricException} for a negative return code, naming the operation. */
    static long check(long rc, String operation) {
        if (rc < 0) {
            throw FabricException.of((int) -rc, operation);
        }
        return rc;
    }

    /** Turns what {@code invokeExact} may throw into an unchecked exception, for the caller to throw. */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new FabricException("native call failed", t);
    }
}
