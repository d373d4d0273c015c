package dev.ferry.fabric;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Keeps the JVM's handlers for the synchronous signals it relies on.
 *
 * <p>The JVM turns SIGSEGV, SIGBUS, SIGILL and SIGFPE into implicit null checks, safepoint
 * polls and stack-overflow checks. libfabric links the PSM libraries ({@code libinfinipath},
 * {@code libpsm2}), which install their own crash handlers when loaded or initialised; with those
 * in place the first implicit null check kills the JVM (leaving a {@code *.vm.btr} file). The
 * guard saves the JVM's handlers before libfabric loads and puts them back after every call that
 * may initialise a provider.
 */
final class SignalGuard {

    private static final int[] SIGNALS = {4 /* SIGILL */, 7 /* SIGBUS */, 8 /* SIGFPE */, 11 /* SIGSEGV */};
    /** Larger than any {@code struct sigaction} (152 bytes on x86-64 and aarch64 glibc). */
    private static final long SIGACTION_BYTES = 256;

    private static final MethodHandle SIGACTION = LibFabric.LINKER.downcallHandle(
            LibFabric.LINKER.defaultLookup().find("sigaction").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG));

    private static final MemorySegment SAVED = Arena.global().allocate(SIGACTION_BYTES * SIGNALS.length, 16);

    private SignalGuard() {
    }

    /** Records the current (the JVM's) handlers. */
    static void save() {
        for (int i = 0; i < SIGNALS.length; i++) {
            call(SIGNALS[i], 0, SAVED.address() + i * SIGACTION_BYTES);
        }
    }

    /** Reinstalls the handlers {@link #save} recorded. */
    static void restore() {
        for (int i = 0; i < SIGNALS.length; i++) {
            call(SIGNALS[i], SAVED.address() + i * SIGACTION_BYTES, 0);
        }
    }

    private static void call(int signal, long action, long old) {
        try {
            int rc = (int) SIGACTION.invokeExact(signal, action, old);
            if (rc != 0) {
                throw new FabricException("sigaction(" + signal + ") failed");
            }
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
