package dev.ferry.fabric;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * libfabric's spin locks, made to give the core away when they wait. libfabric 1.17's shm
 * provider guards each process's command queue with a {@code pthread_spinlock_t} in shared
 * memory: a sender takes the receiver's lock to write its command, the receiver holds its own while
 * it works through its queue. Where a host has more runnable threads than cores, a holder is
 * sometimes preempted inside, and every thread of every process that wants that lock then spins
 * out its time slice: measured on two cores, 5 us of every parameter-server fetch and its p99.9.
 *
 * <p>Once libfabric is loaded, its own calls to {@code pthread_spin_lock} (its entry in the global
 * offset table, nothing else in the process) are pointed at a lock with the same lock word that
 * spins a few microseconds and then yields ({@code ferry_locks.c}, built with the module). A
 * peer process without it shares the locks unchanged. {@value #PROPERTY}{@code =false} leaves
 * libfabric's calls as they are; where the helper cannot be loaded or the table not changed, they
 * stay as they are and one line says why.
 */
final class SpinLockYield {

    /** The system property that turns the change off ({@code false}). */
    static final String PROPERTY = "ferry.fabric.yieldingLocks";
    /** The system property with the turns of the pause instruction before a waiter yields (1 to 65,536). */
    static final String SPINS_PROPERTY = "ferry.fabric.yieldingLockSpins";
    /** Turns before a waiter yields by default: about 10 us on x86-64. */
    static final int DEFAULT_SPINS = 256;

    private static final System.Logger LOG = System.getLogger("dev.ferry.fabric");
    private static final String LIBRARY = "libfabric.so";
    private static SymbolLookup helper;
    private static MethodHandle hooked;

    private SpinLockYield() {
    }

    /**
     * Points libfabric's calls to {@code pthread_spin_lock} at the yielding lock; called once, after
     * libfabric is loaded and before its first call. Returns the calls changed (0: off or not done).
     */
    static synchronized int install() {
        if ("false".equalsIgnoreCase(System.getProperty(PROPERTY, "true").trim())) {
            return 0;
        }
        int spins = spinsOrDefault(System.getProperty(SPINS_PROPERTY));
        try {
            SymbolLookup library = helper();
            Linker linker = Linker.nativeLinker();
            linker.downcallHandle(library.find("ferry_set_spin_turns").orElseThrow(),
                    FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT)).invokeExact(spins);
            FunctionDescriptor byName = FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS);
            MethodHandle hook = linker.downcallHandle(library.find("ferry_hook_spin_lock").orElseThrow(), byName);
            hooked = linker.downcallHandle(library.find("ferry_spin_lock_hooked").orElseThrow(), byName);
            int rc;
            try (Arena arena = Arena.ofConfined()) {
                rc = (int) hook.invokeExact(arena.allocateFrom(LIBRARY));
            }
            if (rc < 0) {
                LOG.log(System.Logger.Level.WARNING, "libfabric's spin locks keep spinning: changing its calls failed, errno "
                        + -rc + " (" + PROPERTY + "=false hides this)");
                return 0;
            }
            if (rc == 0) {
                LOG.log(System.Logger.Level.INFO, "libfabric's spin locks stay as they are: it calls no "
                        + "pthread_spin_lock through its call table");
            } else {
                LOG.log(System.Logger.Level.DEBUG, "libfabric's spin locks yield after a short spin (" + rc + " call sites)");
            }
            return rc;
        } catch (Throwable t) {
            LOG.log(System.Logger.Level.WARNING, "libfabric's spin locks keep spinning: " + t
                    + " (" + PROPERTY + "=false hides this)");
            return 0;
        }
    }

    /**
     * {@link #spins}, with a bad value said at WARNING and the default used instead: it is read
     * while libfabric loads, where a throw would leave only a {@code NoClassDefFoundError}.
     */
    static int spinsOrDefault(String value) {
        try {
            return spins(value);
        } catch (IllegalArgumentException e) {
            LOG.log(System.Logger.Level.WARNING, e.getMessage() + "; the default is used");
            return DEFAULT_SPINS;
        }
    }

    /**
     * The turns of {@value #SPINS_PROPERTY}: {@value #DEFAULT_SPINS} if unset (a bad value is said
     * at WARNING when libfabric loads, and the default used).
     *
     * @throws IllegalArgumentException if set to anything but a number from 1 to 65,536
     */
    static int spins(String value) {
        if (value == null || value.isBlank()) {
            return DEFAULT_SPINS;
        }
        int turns;
        try {
            turns = Integer.parseInt(value.strip());
        } catch (NumberFormatException e) {
            turns = 0;
        }
        if (turns < 1 || turns > 65_536) {
            throw new IllegalArgumentException("-D" + SPINS_PROPERTY + "=" + value
                    + ": turns of the pause instruction before a waiting thread yields, 1 to 65536 (default "
                    + DEFAULT_SPINS + ")");
        }
        return turns;
    }

    /** libfabric's calls to {@code pthread_spin_lock} that now go to the yielding lock, read from its table. */
    static synchronized int hooked() {
        if (hooked == null) {
            return 0;
        }
        try (Arena arena = Arena.ofConfined()) {
            return (int) hooked.invokeExact(arena.allocateFrom(LIBRARY));
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    /** The helper, loaded once. */
    private static synchronized SymbolLookup helper() throws IOException {
        if (helper == null) {
            helper = NativeHelper.load(SpinLockYield.class, "libferrylocks.so");
        }
        return helper;
    }

    /** The helper's lock, for tests: {@code int ferry_spin_lock(pthread_spinlock_t *)}. */
    static MemorySegment lockFunction() throws IOException {
        return helper().find("ferry_spin_lock").orElseThrow();
    }
}
