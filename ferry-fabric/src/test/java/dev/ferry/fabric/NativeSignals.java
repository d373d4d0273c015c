package dev.ferry.fabric;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/** Changes a signal's action from native code's side, as a library would, for tests. */
final class NativeSignals {

    private static final MethodHandle SIGNAL = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("signal").orElseThrow(),
            FunctionDescriptor.of(JAVA_LONG, JAVA_INT, JAVA_LONG));

    private NativeSignals() {
    }

    /** {@code signal(signal, SIG_IGN)}. */
    static void ignore(int signal) {
        try {
            long previous = (long) SIGNAL.invokeExact(signal, 1L);
            if (previous == -1) {
                throw new IllegalStateException("signal(" + signal + ") failed");
            }
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
