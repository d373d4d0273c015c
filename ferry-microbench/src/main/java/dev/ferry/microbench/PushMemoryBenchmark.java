package dev.ferry.microbench;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.LinkedHashSet;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The memory limit under {@code InProcessBenchmark.push4096}: the same pushes (the same Zipf
 * draws), and for each distinct id of a push one load and one store per cache line of a row of
 * an Adagrad table at dimension 64 (weights, state and header as a shard stores them: 576 bytes, 9 lines), in a region
 * of the table's size mapped for transparent huge pages, rows in id order as the benchmark
 * creates them. No lookup, no plan, no arithmetic: what the push's row traffic costs on this
 * machine before any of the parameter server's work. The rows are laid out back to back (one
 * row's lines adjacent), which is no slower than a shard's weights and records apart.
 */
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class PushMemoryBenchmark extends KernelBenchmark {

    /**
     * Bytes of one stored Adagrad row at dimension 64, as a shard keeps it: 256 of weights and a
     * 320-byte record (256 of accumulators, id, step count and stamp, padded to a cache line).
     */
    static final int ROW_BYTES = 576;
    private static final int LINE = 64;
    private static final int PUSHES = 64;
    private static final long HUGE_PAGE = 2L << 20;

    /** Ids in the table, as {@code InProcessBenchmark}'s. */
    @Param({"1048576"})
    public int space;

    private long[][] rowOffsets;
    private Arena arena;
    private MemorySegment rows;
    private int next;
    private long folded;

    /** Maps the rows, touches every page, and draws the pushes as {@code InProcessBenchmark} does. */
    @Setup
    public void setUp() throws Throwable {
        arena = Arena.ofShared();
        rows = hugePages(arena, (long) space * ROW_BYTES);
        for (long at = 0; at < rows.byteSize(); at += 4096) {
            rows.set(Rows.LONG, at, at);
        }
        Workload workload = new Workload(space, Workload.ALPHA, 1 << 20, 9);
        for (int b = 0; b < InProcessBenchmark.BATCHES; b++) {
            workload.batch(workload.batchSize(16, InProcessBenchmark.MAX_BATCH)); // the fetches drawn first
        }
        rowOffsets = new long[PUSHES][];
        for (int p = 0; p < PUSHES; p++) {
            LinkedHashSet<Long> distinct = new LinkedHashSet<>();
            for (long id : workload.batch(InProcessBenchmark.MAX_BATCH)) {
                distinct.add(id);
            }
            rowOffsets[p] = distinct.stream().mapToLong(id -> id * ROW_BYTES).toArray();
        }
    }

    /** Unmaps the rows. */
    @TearDown
    public void tearDown() {
        arena.close();
    }

    /** One push's rows: every line loaded, then stored, in groups of 16 rows (as the push steps them). */
    @Benchmark
    public long push4096Rows() {
        long[] offsets = rowOffsets[next++ & (PUSHES - 1)];
        long sum = folded;
        for (int from = 0; from < offsets.length; from += 16) {
            int to = Math.min(offsets.length, from + 16);
            for (int k = from; k < to; k++) {
                for (int line = 0; line < ROW_BYTES; line += LINE) {
                    sum += rows.get(Rows.LONG, offsets[k] + line);
                }
            }
            for (int k = from; k < to; k++) {
                for (int line = 0; line < ROW_BYTES; line += LINE) {
                    rows.set(Rows.LONG, offsets[k] + line + 8, sum);
                }
            }
        }
        folded = sum;
        return sum;
    }

    private static MemorySegment hugePages(Arena arena, long bytes) throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle mmap = linker.downcallHandle(linker.defaultLookup().find("mmap").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
        MethodHandle munmap = linker.downcallHandle(linker.defaultLookup().find("munmap").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
        MethodHandle madvise = linker.downcallHandle(linker.defaultLookup().find("madvise").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT));
        long length = bytes + 2 * HUGE_PAGE;
        long base = (long) mmap.invokeExact(0L, length, 0x3, 0x02 | 0x20, -1, 0L); // read-write, private anonymous
        if (base == -1L) {
            throw new IllegalStateException("mmap of " + length + " bytes failed");
        }
        long aligned = (base + HUGE_PAGE - 1) & -HUGE_PAGE;
        int advised = (int) madvise.invokeExact(aligned, bytes, 14); // MADV_HUGEPAGE
        if (advised != 0) {
            throw new IllegalStateException("madvise(MADV_HUGEPAGE) failed: huge pages are off on this system");
        }
        return MemorySegment.ofAddress(aligned).reinterpret(bytes, arena, segment -> {
            try {
                int ignored = (int) munmap.invokeExact(base, length);
            } catch (Throwable e) {
                throw new IllegalStateException(e);
            }
        });
    }
}
