package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Keeps the JVM's signal handlers installed, whatever libfabric and the libraries it loads install.
 *
 * <p>The JVM relies on its handlers: SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP are implicit null
 * checks, safepoint polls and stack-overflow checks that happen all the time; SIGQUIT prints the
 * thread dump; SIGUSR2 suspends threads; SIGHUP, SIGINT and SIGTERM run the shutdown hooks.
 * libfabric's providers and the libraries they load install handlers of their own:
 * <ul>
 *   <li>shm (1.17, {@code smr_init_sig_handlers}, on the process's first {@code fi_endpoint})
 *       takes SIGSEGV, SIGBUS, SIGINT and SIGTERM with a handler that unlinks every shm region of
 *       the process and then calls the previous handler: every routine JVM SIGSEGV removes the
 *       process's regions from {@code /dev/shm}, and no new peer can reach it any more;</li>
 *   <li>{@code libinfinipath} (the psm provider) takes SIGINT and SIGTERM with a handler that
 *       calls {@code exit_group(1)}: no shutdown hook runs;</li>
 *   <li>psm2, psm3 and opx take SIGSEGV, SIGBUS, SIGILL, SIGABRT, SIGINT and SIGTERM at
 *       initialisation or endpoint creation for their own clean-up or back-traces.</li>
 * </ul>
 * The guard records every signal's action once, before libfabric is loaded, when only the JVM
 * has installed any. After every call that can initialise a provider or create or connect an
 * object ({@code fi_getinfo}, {@code fi_fabric}, every open, bind, control, address insertion,
 * connect, accept, listen and close: {@link #restore}) it puts back the JVM's action wherever a
 * foreign one was installed. Handlers the JVM itself installs later (a Java
 * {@code Signal.handle} for another signal) are recognised by their address and kept. Data
 * calls (posts, completion reads) and memory registration (once per rendezvous transfer) install
 * nothing, so they are left alone: this costs about 30 {@code sigaction} calls per control call
 * and nothing on the data path.
 *
 * <p>Without the providers' handlers, shm regions are still removed by a normal close
 * ({@code fi_close} of the endpoint) and SIGTERM runs the JVM's shutdown hooks, which close the
 * transports; what a SIGKILL or a crash leaves behind, {@link ShmRegions} removes later.
 */
public final class SignalGuard {

    /** Linux signals 1..31; SIGKILL (9) and SIGSTOP (19) cannot be caught. */
    private static final int LAST_SIGNAL = 31;
    /** Larger than any {@code struct sigaction} (152 bytes on x86-64 and aarch64 glibc). */
    private static final long SIGACTION_BYTES = 256;
    /** {@code sa_handler} at 0, {@code sa_mask} at 8 (the kernel's 64 bits of it), {@code sa_flags} at 136. */
    private static final long HANDLER = 0;
    private static final long MASK = 8;
    private static final long FLAGS = 136;
    private static final int SA_RESTORER = 0x04000000;

    // Its own linker, not LibFabric's: this class is initialised before libfabric is loaded.
    private static final MethodHandle SIGACTION = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("sigaction").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));

    /** The JVM's action per signal, index = signal number. Guarded by the class lock. */
    private static final MemorySegment JVM = Arena.global().allocate(SIGACTION_BYTES * (LAST_SIGNAL + 1), 16);
    private static final MemorySegment CURRENT = Arena.global().allocate(SIGACTION_BYTES, 16);
    /** Addresses of the JVM's own handlers (one per kind of signal), to recognise what the JVM installs later. */
    private static final long[] JVM_HANDLERS;
    private static long restored;

    static {
        List<Long> handlers = new ArrayList<>();
        for (int signal = 1; signal <= LAST_SIGNAL; signal++) {
            if (catchable(signal)) {
                sigaction(signal, 0, JVM.address() + slot(signal));
                long handler = JVM.get(JAVA_LONG, slot(signal) + HANDLER);
                if (handler > 1 && !handlers.contains(handler)) { // neither SIG_DFL (0) nor SIG_IGN (1)
                    handlers.add(handler);
                }
            }
        }
        JVM_HANDLERS = handlers.stream().mapToLong(Long::longValue).toArray();
    }

    private SignalGuard() {
    }

    /** Records the JVM's actions, if not done yet; called before libfabric is loaded. */
    static void init() {
        // The static initialiser does the work.
    }

    /**
     * Puts back the JVM's action for every signal whose handler is a foreign one; call after
     * every native call that may install one. Returns how many were put back.
     */
    static synchronized int restore() {
        int count = 0;
        for (int signal = 1; signal <= LAST_SIGNAL; signal++) {
            if (!catchable(signal)) {
                continue;
            }
            read(signal);
            long jvm = slot(signal);
            if (same(jvm)) {
                continue;
            }
            if (isJvmHandler(CURRENT.get(JAVA_LONG, HANDLER))) {
                // The JVM changed it (Java code registered a handler): that is the JVM's action now.
                MemorySegment.copy(CURRENT, 0, JVM, jvm, SIGACTION_BYTES);
                continue;
            }
            sigaction(signal, JVM.address() + jvm, 0);
            count++;
        }
        restored += count;
        return count;
    }

    /**
     * The signals whose handler is not the JVM's right now, as {@code "SIGNAME: handler 0x..."}
     * lines; empty when every handler is the JVM's. For tests and diagnostics.
     */
    public static synchronized List<String> foreignHandlers() {
        List<String> foreign = new ArrayList<>();
        for (int signal = 1; signal <= LAST_SIGNAL; signal++) {
            if (!catchable(signal)) {
                continue;
            }
            read(signal);
            if (!same(slot(signal)) && !isJvmHandler(CURRENT.get(JAVA_LONG, HANDLER))) {
                foreign.add(String.format("signal %d: handler 0x%x flags 0x%x instead of the JVM's 0x%x", signal,
                        CURRENT.get(JAVA_LONG, HANDLER), CURRENT.get(JAVA_INT, FLAGS),
                        JVM.get(JAVA_LONG, slot(signal) + HANDLER)));
            }
        }
        return foreign;
    }

    /** How many foreign handlers {@link #restore} has replaced in this process so far. */
    public static synchronized long restoredCount() {
        return restored;
    }

    private static boolean catchable(int signal) {
        return signal != 9 && signal != 19;
    }

    /** The offset in {@link #JVM} of the JVM's action for {@code signal}. */
    private static long slot(int signal) {
        return signal * SIGACTION_BYTES;
    }

    private static void read(int signal) {
        CURRENT.fill((byte) 0);
        sigaction(signal, 0, CURRENT.address());
    }

    /**
     * Whether the action just read is the JVM's at {@code jvm}: the same handler, and for a real
     * handler the same mask and flags; {@code SA_RESTORER}, which glibc adds to whatever it
     * installs, and the mask and flags of SIG_DFL and SIG_IGN do not count. Allocates nothing.
     */
    private static boolean same(long jvm) {
        long handler = CURRENT.get(JAVA_LONG, HANDLER);
        if (handler != JVM.get(JAVA_LONG, jvm + HANDLER)) {
            return false;
        }
        return handler <= 1 || (CURRENT.get(JAVA_LONG, MASK) == JVM.get(JAVA_LONG, jvm + MASK)
                && (CURRENT.get(JAVA_INT, FLAGS) & ~SA_RESTORER) == (JVM.get(JAVA_INT, jvm + FLAGS) & ~SA_RESTORER));
    }

    private static boolean isJvmHandler(long handler) {
        for (long h : JVM_HANDLERS) {
            if (h == handler) {
                return true;
            }
        }
        return false;
    }

    private static void sigaction(int signal, long action, long old) {
        try {
            int rc = (int) SIGACTION.invokeExact(signal, action, old);
            if (rc != 0) {
                throw new FabricException("sigaction(" + signal + ") failed");
            }
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable t) {
            throw new FabricException("sigaction(" + signal + ") failed", t);
        }
    }
}
