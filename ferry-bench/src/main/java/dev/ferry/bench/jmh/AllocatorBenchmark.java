package dev.ferry.bench.jmh;

import dev.ferry.memory.AllocatorConfig;
import dev.ferry.memory.LeakDetection;
import dev.ferry.memory.MemoryRegistrar;
import dev.ferry.memory.PoolKind;
import dev.ferry.memory.RegisteredAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One allocate and release pair on a warm thread cache: Ferry's {@link RegisteredAllocator}
 * beside Netty's {@link PooledByteBufAllocator#DEFAULT} direct buffers, same sizes, same run.
 * Run with {@code -prof gc}: {@code gc.alloc.rate.norm} must be 0 B/op for Ferry.
 *
 * <p>Netty is given thread caches on JMH's plain threads
 * ({@code io.netty.allocator.useCacheForAllThreads=true}), its best case; both allocators keep
 * their default leak detection (Netty samples 1 in 128 buffers, Ferry records 1 allocation site
 * in 4096; {@code -p leakDetection=DISABLED} turns Ferry's off).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@State(Scope.Benchmark)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED",
        "-Dio.netty.allocator.useCacheForAllThreads=true"})
public class AllocatorBenchmark {

    /** Bytes per buffer: an eager control message, a page, a large eager payload. */
    @Param({"64", "4096", "262144"})
    public int size;

    /** Ferry's leak detection level. */
    @Param({"SAMPLED"})
    public LeakDetection leakDetection;

    private RegisteredAllocator ferry;
    private PooledByteBufAllocator netty;

    /** Creates the allocators. */
    @Setup(Level.Trial)
    public void setUp() {
        ferry = new RegisteredAllocator(MemoryRegistrar.NONE,
                AllocatorConfig.defaults().withLeakDetection(leakDetection, AllocatorConfig.LOG_LEAKS));
        netty = PooledByteBufAllocator.DEFAULT;
    }

    /** Frees Ferry's slabs. */
    @TearDown(Level.Trial)
    public void tearDown() {
        ferry.close();
    }

    /** Ferry, one thread. */
    @Benchmark
    @Threads(1)
    public boolean ferry1Thread() {
        return ferry.tryAllocate(PoolKind.SEND, size).release();
    }

    /** Ferry, two threads sharing the allocator. */
    @Benchmark
    @Threads(2)
    public boolean ferry2Threads() {
        return ferry.tryAllocate(PoolKind.SEND, size).release();
    }

    /** Netty, one thread. */
    @Benchmark
    @Threads(1)
    public boolean netty1Thread() {
        return netty.directBuffer(size).release();
    }

    /** Netty, two threads sharing the allocator. */
    @Benchmark
    @Threads(2)
    public boolean netty2Threads() {
        return netty.directBuffer(size).release();
    }
}
