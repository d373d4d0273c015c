package dev.ferry.ps;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

import dev.ferry.fabric.NativeHelper;

/**
 * Software prefetch of cache lines into the second-level cache, through a small native helper
 * ({@code src/main/c/ferry_prefetch.c}, built with the module for the building machine's processor
 * architecture). Java has no prefetch: a load that misses holds the processor's window until its
 * line arrives, so touches keep only as many misses under way as the first level's miss buffers
 * and stall the work behind them. A prefetch retires at once, so a gather's or a push's lines
 * arrive while it works on earlier rows. Measured (JMH, this VM): the gather of 1,024 Zipf rows of
 * a 1M-row table 77 against 45 ns per row; the 4,096-id Adagrad push 350 against 290 us.
 *
 * <p>A prefetch never faults (an unmapped or freed address is ignored), so addresses read without a
 * lock may be passed. Where the helper cannot be loaded (a jar built on another architecture or
 * operating system, a temporary directory mounted {@code noexec}) or is turned off
 * ({@code -Dferry.ps.prefetch=false}), {@link #ENABLED} is false and the callers touch lines with
 * loads as before. Stateless; any thread.
 */
final class LinePrefetch {

    /** Whether {@link #spans} prefetches; if not, callers touch their lines with loads. */
    static final boolean ENABLED;
    private static final MethodHandle SPANS;
    private static final System.Logger LOG = System.getLogger(LinePrefetch.class.getName());

    static {
        MethodHandle spans = null;
        if (Boolean.parseBoolean(System.getProperty("ferry.ps.prefetch", "true"))) {
            try {
                spans = load();
            } catch (UnsupportedOperationException notBuiltHere) {
                // Expected on another OS or architecture than the build's.
                LOG.log(System.Logger.Level.INFO, "no software prefetch (cache lines are touched instead): "
                        + notBuiltHere.getMessage());
            } catch (IOException | RuntimeException | LinkageError e) {
                // The helper is there but did not load (a temporary directory mounted noexec, a
                // damaged jar): gathers and pushes run, about 1.7x slower.
                LOG.log(System.Logger.Level.WARNING, "the prefetch helper did not load (cache lines are touched "
                        + "instead; gathers about 1.7x slower): " + e);
            }
        }
        SPANS = spans;
        ENABLED = spans != null;
    }

    /**
     * Lines one call prefetches at most; callers split longer runs into several calls. A critical
     * downcall holds off every safepoint, and so every thread's garbage collection, until it
     * returns, and its contract is a call about as short as an empty one: a gather's chunk of
     * 4,096 rows of the largest dimension (65,536 weights, 4,096 lines a row) would be 16M
     * prefetches, a gigabyte from memory, in one call. 16,384 lines (1 MiB, this machine's
     * second level) keep the measured gathers and pushes (rows of up to 13 lines) to the calls
     * they made before.
     */
    static final int CALL_LINES = 1 << 14;

    private LinePrefetch() {
    }

    /**
     * Prefetches the first {@code pairs} spans of {@code spans}. Only when {@link #ENABLED}.
     */
    static void spans(LineSpans spans, int pairs) {
        assert ENABLED && pairs * 2L <= spans.pairs.length;
        try {
            SPANS.invokeExact(spans.segment, pairs);
        } catch (Throwable t) {
            throw new AssertionError("ferry_prefetch_l2 cannot throw", t);
        }
    }

    /** The helper for this machine, from the module's resources ({@link NativeHelper}). */
    private static MethodHandle load() throws IOException {
        SymbolLookup library = NativeHelper.load(LinePrefetch.class, "libferryprefetch.so");
        MemorySegment function = library.find("ferry_prefetch_l2")
                .orElseThrow(() -> new IOException("no ferry_prefetch_l2 in libferryprefetch.so"));
        return Linker.nativeLinker().downcallHandle(function,
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS, ValueLayout.JAVA_INT),
                Linker.Option.critical(true));
    }
}
