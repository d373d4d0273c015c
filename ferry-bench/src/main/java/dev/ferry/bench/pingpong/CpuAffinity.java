package dev.ferry.bench.pingpong;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Optional;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Pins the calling thread to one CPU with Linux's {@code sched_setaffinity(2)}, through FFM.
 * Two busy-polling threads that share a core take turns in scheduler quanta (milliseconds), so
 * a ping-pong pins its client and server to different CPUs; the JIT and GC threads stay free.
 */
public final class CpuAffinity {

    /** Bytes of the CPU mask: 1024 CPUs, glibc's {@code cpu_set_t}. */
    private static final long MASK_BYTES = 128;
    private static final MethodHandle SET_AFFINITY = lookup();

    private CpuAffinity() {
    }

    private static MethodHandle lookup() {
        Linker linker = Linker.nativeLinker();
        Optional<MemorySegment> symbol = linker.defaultLookup().find("sched_setaffinity");
        return symbol.map(s -> linker.downcallHandle(s, FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS)))
                .orElse(null);
    }

    /** The CPUs this process may run on. */
    public static int cpus() {
        return Runtime.getRuntime().availableProcessors();
    }

    /**
     * Pins the calling thread to {@code cpu}.
     *
     * @return false if the platform has no {@code sched_setaffinity} or refused (the CPU is not
     *     in this process's set); the thread then runs where the scheduler puts it
     */
    public static boolean pinCurrentThread(int cpu) {
        if (SET_AFFINITY == null || cpu < 0 || cpu >= MASK_BYTES * 8) {
            return false;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment mask = arena.allocate(MASK_BYTES, 8);
            mask.set(JAVA_LONG, (cpu / 64) * 8L, 1L << (cpu % 64));
            return (int) SET_AFFINITY.invokeExact(0, MASK_BYTES, mask) == 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /** The CPU for the client's polling thread, or -1 not to pin: the first, when there are two or more. */
    public static int clientCpu(boolean pin) {
        return pin && cpus() >= 2 ? 0 : -1;
    }

    /** The CPU for the server's polling thread, or -1 not to pin: the last, when there are two or more. */
    public static int serverCpu(boolean pin) {
        return pin && cpus() >= 2 ? cpus() - 1 : -1;
    }
}
