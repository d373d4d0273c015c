package dev.ferry.transport;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The scheduler priority of the threads that move a transport's bytes: a fabric transport's
 * progress thread and the Netty transport's event loops. On a host whose cores are all busy
 * (a parameter server beside its optimizer, compilers and other jobs), the thread that serves
 * a peer's read or answers a request waits for a core like any other, and every peer waits with
 * it. A negative nice value ({@value #PROPERTY}, -20 to 19, Linux, per thread) lets it run first
 * when it wakes; the application's threads keep the rest. 0, the default, leaves the thread as the
 * JVM made it.
 *
 * <p>A nice value below the process's own needs {@code CAP_SYS_NICE} or a raised
 * {@code RLIMIT_NICE} ({@code ulimit -e}); where the kernel refuses, the thread runs at the default
 * and one line says why. A value outside -20..19 is refused when the transport is made.
 */
public final class ProgressNice {

    /** The system property: the nice value asked for the transports' progress threads. */
    public static final String PROPERTY = "ferry.transport.progressNice";

    private static final System.Logger LOG = System.getLogger("dev.ferry.transport");
    private static final int PRIO_PROCESS = 0;
    private static final MethodHandle SETPRIORITY;
    private static final MethodHandle GETTID;
    private static final VarHandle ERRNO;
    private static final long ERRNO_BYTES;
    private static final AtomicBoolean REFUSAL_LOGGED = new AtomicBoolean();

    static {
        MethodHandle set = null;
        MethodHandle tid = null;
        VarHandle errno = null;
        long errnoBytes = 0;
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux")) {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                Linker.Option capture = Linker.Option.captureCallState("errno");
                set = linker.downcallHandle(libc.find("setpriority").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                                ValueLayout.JAVA_INT), capture);
                tid = linker.downcallHandle(libc.find("gettid").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT));
                errno = Linker.Option.captureStateLayout().varHandle(
                        java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));
                errnoBytes = Linker.Option.captureStateLayout().byteSize();
            } catch (RuntimeException | Error unavailable) {
                set = null;
                tid = null;
            }
        }
        SETPRIORITY = set;
        GETTID = tid;
        ERRNO = errno;
        ERRNO_BYTES = errnoBytes;
    }

    private ProgressNice() {
    }

    /**
     * The nice value asked for in {@value #PROPERTY}, 0 if unset.
     *
     * @throws IllegalArgumentException if it is not a number from -20 to 19
     */
    public static int requested() {
        String value = System.getProperty(PROPERTY);
        if (value == null || value.isBlank()) {
            return 0;
        }
        int nice;
        try {
            nice = Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(PROPERTY + " must be a nice value from -20 to 19, not '" + value + "'");
        }
        if (nice < -20 || nice > 19) {
            throw new IllegalArgumentException(PROPERTY + " must be a nice value from -20 to 19, not " + nice);
        }
        return nice;
    }

    /**
     * Sets the calling thread's nice value to {@code nice} (0: leaves it alone).
     *
     * @return true if the thread now runs at {@code nice} (or nothing was asked); false if the
     *     kernel refused or the platform has no per-thread priority (logged once per process)
     */
    public static boolean applyToCurrentThread(int nice) {
        if (nice == 0) {
            return true;
        }
        if (SETPRIORITY == null) {
            refused(nice, "this platform has no per-thread setpriority");
            return false;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(ERRNO_BYTES);
            int tid = (int) GETTID.invokeExact();
            int rc = (int) SETPRIORITY.invokeExact(state, PRIO_PROCESS, tid, nice);
            if (rc == 0) {
                return true;
            }
            int errno = (int) ERRNO.get(state, 0L);
            refused(nice, errno == 13 || errno == 1
                    ? "not permitted (errno " + errno + "): it needs CAP_SYS_NICE or RLIMIT_NICE (ulimit -e)"
                    : "errno " + errno);
            return false;
        } catch (Throwable t) {
            refused(nice, t.toString());
            return false;
        }
    }

    private static void refused(int nice, String why) {
        if (REFUSAL_LOGGED.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.WARNING, "progress threads run at the default priority: nice " + nice
                    + " (" + PROPERTY + ") refused, " + why);
        }
    }
}
